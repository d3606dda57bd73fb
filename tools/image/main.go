package main

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"debug/buildinfo"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's layout and config. ../../Dockerfile states the same (its final
// stage sets each of them explicitly), and test/compose checks that it does.
const (
	binaryPath = "/usr/local/bin/walrelay"
	caPath     = "/etc/ssl/certs/ca-certificates.crt"
	uid        = 65532
	home       = "/home/nonroot"
	httpPort   = "8080/tcp"
	pathEnv    = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	source     = "https://github.com/walrelay/walrelay"
)

// N.B. the same users and groups as distroless's nonroot images (the
// Dockerfile's base), so that a file owned by 65532 reads as nonroot in
// either image.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group = "root:x:0:\n" +
		"nobody:x:65534:\n" +
		"tty:x:5:\n" +
		"staff:x:50:\n" +
		"nonroot:x:65532:\n"
	// Go's resolver reads it for the order of /etc/hosts and DNS.
	nsswitch = "hosts: files dns\n"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	bin := fs.String("binary", "", "the walrelay binary to put in the image: static (CGO_ENABLED=0), for linux")
	caFile := fs.String("ca-file", "/etc/ssl/certs/ca-certificates.crt", "PEM bundle of the CA certificates the image trusts")
	version := fs.String("version", "dev", "walrelay's version, for the org.opencontainers.image.version label and the tag")
	repo := fs.String("repository", "walrelay", "repository name of the tag manifest.json and index.json carry (REPOSITORY:VERSION)")
	out := fs.String("out", "bin/walrelay-image.tar", "the tar file to write")
	epoch := fs.String("source-date-epoch", os.Getenv("SOURCE_DATE_EPOCH"), "seconds since 1970 for every time stamp in the image (default $SOURCE_DATE_EPOCH)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *bin == "" {
		return errors.New("no -binary given")
	}
	secs, err := strconv.ParseInt(*epoch, 10, 64)
	if err != nil {
		return fmt.Errorf("parse SOURCE_DATE_EPOCH %q (seconds since 1970, e.g. git log -1 --format=%%ct): %w", *epoch, err)
	}
	created := time.Unix(secs, 0).UTC()

	arch, err := checkBinary(*bin)
	if err != nil {
		return err
	}
	ca, err := readCA(*caFile)
	if err != nil {
		return err
	}
	exe, err := os.ReadFile(*bin)
	if err != nil {
		return fmt.Errorf("read binary: %w", err)
	}

	base, err := layer(created, []entry{
		dir("etc/", 0o755, 0),
		file("etc/group", 0o644, []byte(group)),
		file("etc/nsswitch.conf", 0o644, []byte(nsswitch)),
		file("etc/passwd", 0o644, []byte(passwd)),
		dir("etc/ssl/", 0o755, 0),
		dir("etc/ssl/certs/", 0o755, 0),
		file(strings.TrimPrefix(caPath, "/"), 0o644, ca),
		dir("home/", 0o755, 0),
		dir(strings.TrimPrefix(home, "/")+"/", 0o700, uid),
		// N.B. sticky and writable by all, as on any Linux: with a
		// read-only root file system it is where an emptyDir goes.
		dir("tmp/", 0o1777, 0),
		dir("usr/", 0o755, 0),
		dir("usr/local/", 0o755, 0),
		dir("usr/local/bin/", 0o755, 0),
	})
	if err != nil {
		return err
	}
	app, err := layer(created, []entry{file(strings.TrimPrefix(binaryPath, "/"), 0o755, exe)})
	if err != nil {
		return err
	}

	// N.B. OCI media types throughout (manifest, config, gzip layers):
	// what registries, containerd and docker load (25+) all take.
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, MediaType: types.OCILayer, History: v1.History{
			Created: v1.Time{Time: created}, CreatedBy: "tools/image: /etc (passwd, group, nsswitch.conf, CA certificates), " + home + ", /tmp",
		}},
		mutate.Addendum{Layer: app, MediaType: types.OCILayer, History: v1.History{
			Created: v1.Time{Time: created}, CreatedBy: "tools/image: " + binaryPath,
		}},
	)
	if err != nil {
		return fmt.Errorf("append layers: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Created = v1.Time{Time: created}
	cf.OS = "linux"
	cf.Architecture = arch
	cf.Config = v1.Config{
		User:         fmt.Sprintf("%d:%d", uid, uid),
		Env:          []string{"PATH=" + pathEnv, "SSL_CERT_FILE=" + caPath},
		Entrypoint:   []string{binaryPath},
		Cmd:          []string{"run"},
		WorkingDir:   home,
		ExposedPorts: map[string]struct{}{httpPort: {}},
		Labels: map[string]string{
			"org.opencontainers.image.title":   "walrelay",
			"org.opencontainers.image.version": *version,
			"org.opencontainers.image.source":  source,
		},
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return fmt.Errorf("set config: %w", err)
	}

	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return err
	}
	tmp := *out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	sum, err := writeArchive(f, img, *repo+":"+*version, arch, created)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", *out, err)
	}
	if err := os.Rename(tmp, *out); err != nil {
		return err
	}
	fmt.Printf("%s: %s:%s linux/%s, manifest %s, %d layers, %.1f MiB compressed, %.1f MiB unpacked\n",
		*out, *repo, *version, arch, sum.digest, sum.layers, mib(sum.compressed), mib(sum.unpacked))
	return nil
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// checkBinary refuses a binary the image cannot run: not for linux, or linked
// against a C library that scratch does not have. It returns its GOARCH.
func checkBinary(path string) (string, error) {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read build info of %s (a Go binary?): %w", path, err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if settings["GOOS"] != "linux" {
		return "", fmt.Errorf("%s is built for GOOS=%s: build it with GOOS=linux", path, settings["GOOS"])
	}
	if settings["CGO_ENABLED"] != "0" {
		return "", fmt.Errorf("%s is built with CGO_ENABLED=%q: the image has no C library, build it with CGO_ENABLED=0", path, settings["CGO_ENABLED"])
	}
	if settings["GOARCH"] == "" {
		return "", fmt.Errorf("%s names no GOARCH in its build info", path)
	}
	return settings["GOARCH"], nil
}

// readCA reads a PEM bundle and refuses one without a certificate: an image
// without CA certificates cannot verify Kafka's or PostgreSQL's.
func readCA(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read CA certificates: %w (install ca-certificates, or pass -ca-file)", err)
	}
	n := 0
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return nil, fmt.Errorf("parse CA certificate %d of %s: %w", n+1, path, err)
		}
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return data, nil
}

type entry struct {
	hdr  tar.Header
	data []byte
}

func dir(name string, mode int64, owner int) entry {
	return entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode, Uid: owner, Gid: owner}}
}

func file(name string, mode int64, data []byte) entry {
	return entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data))}, data: data}
}

// layer is a gzip layer of entries, in the order given, every time stamp at
// created.
func layer(created time.Time, entries []entry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := e.hdr
		h.ModTime = created
		if err := tw.WriteHeader(&h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

type summary struct {
	digest               v1.Hash
	layers               int
	compressed, unpacked int64
}

// writeArchive writes img as an OCI image layout in a tar, with a Docker
// manifest.json beside it naming the same blobs.
func writeArchive(w io.Writer, img v1.Image, tag, arch string, created time.Time) (summary, error) {
	var sum summary
	tw := tar.NewWriter(w)
	put := func(name string, data []byte) error {
		h := tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: created}
		if err := tw.WriteHeader(&h); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	putDir := func(name string) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755, ModTime: created})
	}
	blob := func(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }

	if err := put("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return sum, err
	}
	if err := putDir("blobs/"); err != nil {
		return sum, err
	}
	if err := putDir("blobs/sha256/"); err != nil {
		return sum, err
	}

	rawCfg, err := img.RawConfigFile()
	if err != nil {
		return sum, err
	}
	cfgName, err := img.ConfigName()
	if err != nil {
		return sum, err
	}
	if err := put(blob(cfgName), rawCfg); err != nil {
		return sum, err
	}
	layers, err := img.Layers()
	if err != nil {
		return sum, err
	}
	var layerNames []string
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return sum, err
		}
		rc, err := l.Compressed()
		if err != nil {
			return sum, err
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return sum, err
		}
		u, err := l.Uncompressed()
		if err != nil {
			return sum, err
		}
		n, err := io.Copy(io.Discard, u)
		u.Close()
		if err != nil {
			return sum, err
		}
		if err := put(blob(d), data); err != nil {
			return sum, err
		}
		layerNames = append(layerNames, blob(d))
		sum.layers++
		sum.compressed += int64(len(data))
		sum.unpacked += n
	}
	rawManifest, err := img.RawManifest()
	if err != nil {
		return sum, err
	}
	if sum.digest, err = img.Digest(); err != nil {
		return sum, err
	}
	if err := put(blob(sum.digest), rawManifest); err != nil {
		return sum, err
	}

	_, version, _ := strings.Cut(tag, ":")
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
		Add: img,
		Descriptor: v1.Descriptor{
			MediaType: types.OCIManifestSchema1,
			Platform:  &v1.Platform{OS: "linux", Architecture: arch},
			Annotations: map[string]string{
				// N.B. ref.name is the tag (skopeo, crane); containerd's
				// key carries the whole name, for docker load.
				"org.opencontainers.image.ref.name": version,
				"io.containerd.image.name":          tag,
			},
		},
	})
	rawIndex, err := idx.RawManifest()
	if err != nil {
		return sum, err
	}
	if err := put("index.json", rawIndex); err != nil {
		return sum, err
	}
	docker, err := json.Marshal([]struct {
		Config   string
		RepoTags []string
		Layers   []string
	}{{Config: blob(cfgName), RepoTags: []string{tag}, Layers: layerNames}})
	if err != nil {
		return sum, err
	}
	if err := put("manifest.json", docker); err != nil {
		return sum, err
	}
	return sum, tw.Close()
}
