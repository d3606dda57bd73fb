package compose

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walrelay/walrelay/test/testbed"
)

// The image is read here without go-containerregistry (which wrote it): the
// OCI image layout and image spec are the truth, not the library.

// imageEpoch is the SOURCE_DATE_EPOCH the test builds with: every time stamp
// in the image must be it.
const imageEpoch = 1700000000

// imageInitEnv, when set, makes the test binary the image's init: it sets up
// the container's mounts and execs the entrypoint (imageInit).
const imageInitEnv = "WALRELAY_TEST_IMAGE_INIT"

type ociDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations"`
	Platform    *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform"`
}

type imageConfig struct {
	Architecture string    `json:"architecture"`
	OS           string    `json:"os"`
	Created      time.Time `json:"created"`
	Config       struct {
		User         string              `json:"User"`
		Env          []string            `json:"Env"`
		Entrypoint   []string            `json:"Entrypoint"`
		Cmd          []string            `json:"Cmd"`
		WorkingDir   string              `json:"WorkingDir"`
		ExposedPorts map[string]struct{} `json:"ExposedPorts"`
		Labels       map[string]string   `json:"Labels"`
	} `json:"config"`
	RootFS struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
	History []struct {
		Created time.Time `json:"created"`
	} `json:"history"`
}

// ociImage is make image's tar, checked and decoded.
type ociImage struct {
	tarBytes   []byte
	manifest   string // digest
	config     imageConfig
	layers     [][]byte // gzip, in order
	compressed int64
	unpacked   int64
}

func sha(data []byte) string {
	s := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(s[:])
}

// readOCI checks an OCI image layout tar (one image, gzip layers) against
// the specs: blob digests and sizes, media types, diff_ids, time stamps, and
// the Docker manifest.json beside it.
func readOCI(data []byte) (*ociImage, error) {
	img := &ociImage{tarBytes: data}
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read tar: %w", err)
		}
		if h.ModTime.Unix() != imageEpoch || h.Uid != 0 || h.Gid != 0 {
			return nil, fmt.Errorf("tar entry %s: mtime %s, owner %d:%d, want %s and 0:0", h.Name, h.ModTime.UTC(), h.Uid, h.Gid, time.Unix(imageEpoch, 0).UTC())
		}
		if h.Typeflag == tar.TypeReg {
			if files[h.Name], err = io.ReadAll(tr); err != nil {
				return nil, err
			}
		}
	}
	if got := string(files["oci-layout"]); got != `{"imageLayoutVersion":"1.0.0"}` {
		return nil, fmt.Errorf("oci-layout is %q", got)
	}
	blob := func(d ociDescriptor, mediaType string) ([]byte, error) {
		if d.MediaType != mediaType {
			return nil, fmt.Errorf("blob %s has media type %q, want %q", d.Digest, d.MediaType, mediaType)
		}
		b, ok := files["blobs/"+strings.Replace(d.Digest, ":", "/", 1)]
		if !ok {
			return nil, fmt.Errorf("blob %s is missing", d.Digest)
		}
		if sha(b) != d.Digest || int64(len(b)) != d.Size {
			return nil, fmt.Errorf("blob %s: digest %s and size %d, the descriptor says %d", d.Digest, sha(b), len(b), d.Size)
		}
		return b, nil
	}
	var index struct {
		SchemaVersion int             `json:"schemaVersion"`
		MediaType     string          `json:"mediaType"`
		Manifests     []ociDescriptor `json:"manifests"`
	}
	if err := json.Unmarshal(files["index.json"], &index); err != nil {
		return nil, fmt.Errorf("index.json: %w", err)
	}
	if index.SchemaVersion != 2 || index.MediaType != "application/vnd.oci.image.index.v1+json" || len(index.Manifests) != 1 {
		return nil, fmt.Errorf("index.json: schema %d, media type %q, %d manifests; want 2, an OCI index, one manifest", index.SchemaVersion, index.MediaType, len(index.Manifests))
	}
	md := index.Manifests[0]
	if md.Platform == nil || md.Platform.OS != "linux" || md.Platform.Architecture != runtime.GOARCH {
		return nil, fmt.Errorf("index.json: platform %+v, want linux/%s", md.Platform, runtime.GOARCH)
	}
	rawManifest, err := blob(md, "application/vnd.oci.image.manifest.v1+json")
	if err != nil {
		return nil, err
	}
	img.manifest = md.Digest
	var manifest struct {
		SchemaVersion int             `json:"schemaVersion"`
		Config        ociDescriptor   `json:"config"`
		Layers        []ociDescriptor `json:"layers"`
	}
	if err := json.Unmarshal(rawManifest, &manifest); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	rawConfig, err := blob(manifest.Config, "application/vnd.oci.image.config.v1+json")
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(rawConfig, &img.config); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cfg := img.config
	if cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH {
		return nil, fmt.Errorf("config: %s/%s, want linux/%s", cfg.OS, cfg.Architecture, runtime.GOARCH)
	}
	if cfg.Created.Unix() != imageEpoch {
		return nil, fmt.Errorf("config: created %s, want SOURCE_DATE_EPOCH %d", cfg.Created, imageEpoch)
	}
	for i, h := range cfg.History {
		if h.Created.Unix() != imageEpoch {
			return nil, fmt.Errorf("config: history %d created %s, want SOURCE_DATE_EPOCH", i, h.Created)
		}
	}
	if cfg.RootFS.Type != "layers" || len(cfg.RootFS.DiffIDs) != len(manifest.Layers) || len(manifest.Layers) == 0 {
		return nil, fmt.Errorf("config: rootfs %+v for %d layers", cfg.RootFS, len(manifest.Layers))
	}
	var dockerLayers []string
	for i, l := range manifest.Layers {
		b, err := blob(l, "application/vnd.oci.image.layer.v1.tar+gzip")
		if err != nil {
			return nil, err
		}
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("layer %d: %w", i, err)
		}
		u, err := io.ReadAll(zr)
		if err != nil {
			return nil, fmt.Errorf("layer %d: %w", i, err)
		}
		lr := tar.NewReader(bytes.NewReader(u))
		for {
			h, err := lr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("layer %d: %w", i, err)
			}
			if h.ModTime.Unix() != imageEpoch {
				return nil, fmt.Errorf("layer %d: %s has mtime %s, want SOURCE_DATE_EPOCH %d", i, h.Name, h.ModTime.UTC(), imageEpoch)
			}
		}
		if sha(u) != cfg.RootFS.DiffIDs[i] {
			return nil, fmt.Errorf("layer %d: uncompressed digest %s, config's diff_id %s", i, sha(u), cfg.RootFS.DiffIDs[i])
		}
		img.layers = append(img.layers, b)
		img.compressed += int64(len(b))
		img.unpacked += int64(len(u))
		dockerLayers = append(dockerLayers, "blobs/"+strings.Replace(l.Digest, ":", "/", 1))
	}
	var docker []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(files["manifest.json"], &docker); err != nil {
		return nil, fmt.Errorf("manifest.json (docker load): %w", err)
	}
	if len(docker) != 1 || docker[0].Config != "blobs/"+strings.Replace(manifest.Config.Digest, ":", "/", 1) ||
		strings.Join(docker[0].Layers, " ") != strings.Join(dockerLayers, " ") || len(docker[0].RepoTags) != 1 {
		return nil, fmt.Errorf("manifest.json %+v does not name the OCI manifest's config %s and layers %v with one tag", docker, manifest.Config.Digest, dockerLayers)
	}
	return img, nil
}

// unpack applies layers in order onto root as a container runtime does,
// whiteouts included: ".wh.NAME" deletes NAME of a lower layer,
// ".wh..wh..opq" empties its directory of what lower layers put there.
func unpack(layers [][]byte, root string) error {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	for i, l := range layers {
		zr, err := gzip.NewReader(bytes.NewReader(l))
		if err != nil {
			return err
		}
		fromThisLayer := map[string]bool{}
		tr := tar.NewReader(zr)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return fmt.Errorf("layer %d: %w", i, err)
			}
			name := path.Clean("/" + h.Name)
			if name == "/" {
				continue
			}
			target := filepath.Join(root, filepath.FromSlash(name))
			dir, base := path.Split(name)
			switch {
			case base == ".wh..wh..opq":
				entries, err := os.ReadDir(filepath.Join(root, dir))
				if err != nil && !errors.Is(err, fs.ErrNotExist) {
					return err
				}
				for _, e := range entries {
					if p := path.Join(dir, e.Name()); !fromThisLayer[p] {
						if err := os.RemoveAll(filepath.Join(root, p)); err != nil {
							return err
						}
					}
				}
				continue
			case strings.HasPrefix(base, ".wh."):
				if err := os.RemoveAll(filepath.Join(root, dir, strings.TrimPrefix(base, ".wh."))); err != nil {
					return err
				}
				continue
			}
			fromThisLayer[name] = true
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			mode := h.FileInfo().Mode()
			if fi, err := os.Lstat(target); err == nil && !(fi.IsDir() && h.Typeflag == tar.TypeDir) {
				if err := os.RemoveAll(target); err != nil {
					return err
				}
			}
			switch h.Typeflag {
			case tar.TypeDir:
				if err := os.MkdirAll(target, 0o755); err != nil {
					return err
				}
			case tar.TypeReg:
				f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
				if err != nil {
					return err
				}
				_, err = io.Copy(f, tr)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					return err
				}
			case tar.TypeSymlink:
				if err := os.Symlink(h.Linkname, target); err != nil {
					return err
				}
			case tar.TypeLink:
				if err := os.Link(filepath.Join(root, filepath.FromSlash(path.Clean("/"+h.Linkname))), target); err != nil {
					return err
				}
			default:
				return fmt.Errorf("layer %d: %s: tar type %c is not handled", i, name, h.Typeflag)
			}
			if err := os.Lchown(target, h.Uid, h.Gid); err != nil {
				return err
			}
			if h.Typeflag != tar.TypeSymlink {
				if err := os.Chmod(target, mode&(fs.ModePerm|fs.ModeSticky|fs.ModeSetuid|fs.ModeSetgid)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func TestUnpackAppliesWhiteouts(t *testing.T) {
	layer := func(entries ...string) []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		tw := tar.NewWriter(zw)
		for _, e := range entries {
			if strings.HasSuffix(e, "/") {
				tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: e, Mode: 0o755})
				continue
			}
			tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: e, Mode: 0o644, Size: int64(len(e))})
			tw.Write([]byte(e))
		}
		tw.Close()
		zw.Close()
		return buf.Bytes()
	}
	root := t.TempDir()
	err := unpack([][]byte{
		layer("a/", "a/x", "a/y", "b/", "b/z", "b/c/", "b/c/d"),
		layer("a/.wh.x", "b/new", "b/.wh..wh..opq", "e"),
	}, root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if rel, _ := filepath.Rel(root, p); rel != "." && !d.IsDir() {
			got = append(got, filepath.ToSlash(rel))
		}
		return nil
	})
	if want := "a/y b/new e"; strings.Join(got, " ") != want {
		t.Errorf("unpacked %v, want %s", got, want)
	}
}

// cloneRoot copies the tree src to dst with modes and owners; the files
// link reports true for are hard-linked instead of copied.
func cloneRoot(src, dst string, link func(path string) bool) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		switch {
		case d.IsDir():
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case d.Type().IsRegular() && link(p):
			return os.Link(p, target)
		case d.Type().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if err := os.WriteFile(target, data, 0o600); err != nil {
				return err
			}
		default:
			return nil
		}
		if err := os.Lchown(target, int(st.Uid), int(st.Gid)); err != nil {
			return err
		}
		return os.Chmod(target, fi.Mode()&(fs.ModePerm|fs.ModeSticky|fs.ModeSetuid|fs.ModeSetgid))
	})
}

// imageUser resolves a config's User as a runtime does: numeric uid[:gid],
// or names looked up in the image's /etc/passwd and /etc/group.
func imageUser(root, user string) (uid, gid int, err error) {
	if user == "" {
		return 0, 0, nil
	}
	u, g, hasGroup := strings.Cut(user, ":")
	lookup := func(file, name string, field int) (int, error) {
		if n, err := strconv.Atoi(name); err == nil {
			return n, nil
		}
		data, err := os.ReadFile(filepath.Join(root, "etc", file))
		if err != nil {
			return 0, err
		}
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Split(line, ":"); len(f) > field && f[0] == name {
				return strconv.Atoi(f[field])
			}
		}
		return 0, fmt.Errorf("%s is not in /etc/%s", name, file)
	}
	if uid, err = lookup("passwd", u, 2); err != nil {
		return 0, 0, err
	}
	if !hasGroup {
		gid, err = lookup("passwd", u, 3)
		if _, numeric := strconv.Atoi(u); numeric == nil {
			gid, err = 0, nil // like Docker: a numeric user alone gets group 0
		}
		return uid, gid, err
	}
	gid, err = lookup("group", g, 2)
	return uid, gid, err
}

// accessible reports whether uid:gid may access fi with the permission bits
// in want (4 read, 2 write, 1 execute/search).
func accessible(fi fs.FileInfo, uid, gid int, want fs.FileMode) bool {
	st := fi.Sys().(*syscall.Stat_t)
	perm := fi.Mode().Perm()
	switch {
	case int(st.Uid) == uid:
		return perm>>6&want == want
	case int(st.Gid) == gid:
		return perm>>3&want == want
	default:
		return perm&want == want
	}
}

func envValue(env []string, name string) (string, bool) {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}

// imageProblems lists what makes the unpacked image at root with config cfg
// unfit to run walrelay: root user, a missing or dynamically linked
// entrypoint, no CA certificates, no usable /tmp or working directory.
func imageProblems(root string, cfg imageConfig) []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	c := cfg.Config

	uid, gid := 0, 0
	switch u, _, _ := strings.Cut(c.User, ":"); {
	case c.User == "":
		add("config sets no User: the image runs as root")
	case u == "0" || u == "root":
		add("config User %q is root", c.User)
	default:
		if _, err := strconv.Atoi(u); err != nil {
			add("config User %q is not numeric: Kubernetes' runAsNonRoot cannot verify a name", c.User)
		}
		var err error
		if uid, gid, err = imageUser(root, c.User); err != nil {
			add("config User %q: %v", c.User, err)
		} else if data, err := os.ReadFile(filepath.Join(root, "etc", "passwd")); err != nil || !strings.Contains(string(data), fmt.Sprintf(":x:%d:%d:", uid, gid)) {
			add("/etc/passwd has no user %d with group %d (programs asking who they are find nobody)", uid, gid)
		}
	}

	if len(c.Entrypoint) == 0 || !path.IsAbs(c.Entrypoint[0]) {
		add("config Entrypoint %q is not an absolute path", c.Entrypoint)
	} else {
		exe := filepath.Join(root, filepath.FromSlash(c.Entrypoint[0]))
		fi, err := os.Stat(exe)
		switch {
		case err != nil:
			add("entrypoint %s: %v", c.Entrypoint[0], err)
		case !fi.Mode().IsRegular() || !accessible(fi, uid, gid, 1):
			add("entrypoint %s (%s) is not a file user %d may execute", c.Entrypoint[0], fi.Mode(), uid)
		default:
			f, err := elf.Open(exe)
			if err != nil {
				add("entrypoint %s is not an ELF binary: %v", c.Entrypoint[0], err)
				break
			}
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP {
					add("entrypoint %s is dynamically linked (it names an interpreter): the image has no C library", c.Entrypoint[0])
				}
			}
			f.Close()
		}
	}

	caFile, ok := envValue(c.Env, "SSL_CERT_FILE")
	if !ok {
		caFile = "/etc/ssl/certs/ca-certificates.crt" // Go's first choice on Linux
	}
	n := 0
	fi, err := os.Stat(filepath.Join(root, filepath.FromSlash(caFile)))
	if err == nil && !accessible(fi, uid, gid, 4) {
		err = fmt.Errorf("not readable by user %d", uid)
	}
	if err == nil {
		data, _ := os.ReadFile(filepath.Join(root, filepath.FromSlash(caFile)))
		for rest := data; ; {
			var b *pem.Block
			if b, rest = pem.Decode(rest); b == nil {
				break
			}
			if b.Type == "CERTIFICATE" {
				n++
			}
		}
	}
	if err != nil || n == 0 {
		add("CA certificates %s: %d certificates (%v): TLS to Kafka or PostgreSQL could verify nothing", caFile, n, err)
	}

	if fi, err := os.Stat(filepath.Join(root, "tmp")); err != nil || !fi.IsDir() || fi.Mode()&fs.ModeSticky == 0 || fi.Mode().Perm() != 0o777 {
		add("/tmp is missing or not mode 1777: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(root, filepath.FromSlash(c.WorkingDir))); c.WorkingDir == "" || err != nil || !fi.IsDir() || !accessible(fi, uid, gid, 1) {
		add("working directory %q is missing or not searchable by user %d: %v", c.WorkingDir, uid, err)
	}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if info, err := d.Info(); err == nil && info.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
			add("%s is set-user-id or set-group-id", p)
		}
		return nil
	})
	return problems
}

// makeImage runs make image into dir, the binary at bin, with the test's
// version and epoch, and returns the tar's bytes and make's output.
func makeImage(t *testing.T, dir, bin string, extraEnv ...string) ([]byte, string) {
	t.Helper()
	tarPath := filepath.Join(dir, "walrelay-image.tar")
	cmd := exec.Command("make", "--no-print-directory", "image",
		"IMAGE="+tarPath, "IMAGE_BIN="+bin,
		"VERSION="+testVersion, "SOURCE_DATE_EPOCH="+strconv.Itoa(imageEpoch))
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), extraEnv...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	data, err := os.ReadFile(tarPath)
	if err != nil {
		t.Fatal(err)
	}
	return data, string(out)
}

// initSpec is what imageInit sets up before it execs the entrypoint.
type initSpec struct {
	Root     string
	Dir      string
	UID, GID int
	Args     []string // Args[0] is the path of the program in the image
	Env      []string
	Binds    [][2]string // host directory, mount point in the image (read-only)
}

// imageInit runs in a child of the test in new mount, PID, UTS and IPC
// namespaces (the network is the host's, where the test bed listens): it
// mounts the image's root read-only (Kubernetes' readOnlyRootFilesystem),
// the binds read-only on it (a Secret volume), a /proc of the new PID
// namespace, then chroots, drops to the image's user with no supplementary
// groups and no new privileges, and execs the entrypoint as PID 1.
func imageInit(raw string) int {
	var s initSpec
	fail := func(what string, err error) int {
		fmt.Fprintf(os.Stderr, "image init: %s: %v\n", what, err)
		return 125
	}
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return fail("spec", err)
	}
	steps := []struct {
		what string
		do   func() error
	}{
		{"make mounts private", func() error { return syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, "") }},
		{"bind the root", func() error { return syscall.Mount(s.Root, s.Root, "", syscall.MS_BIND, "") }},
		{"make the root read-only", func() error {
			return syscall.Mount("", s.Root, "", syscall.MS_REMOUNT|syscall.MS_BIND|syscall.MS_RDONLY|syscall.MS_NOSUID|syscall.MS_NODEV, "")
		}},
		{"bind volumes", func() error {
			for _, b := range s.Binds {
				dst := filepath.Join(s.Root, b[1])
				if err := syscall.Mount(b[0], dst, "", syscall.MS_BIND, ""); err != nil {
					return err
				}
				if err := syscall.Mount("", dst, "", syscall.MS_REMOUNT|syscall.MS_BIND|syscall.MS_RDONLY|syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
					return err
				}
			}
			return nil
		}},
		{"mount /proc", func() error {
			return syscall.Mount("proc", filepath.Join(s.Root, "proc"), "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, "")
		}},
		{"chroot", func() error { return syscall.Chroot(s.Root) }},
		{"chdir", func() error { return syscall.Chdir(s.Dir) }},
		{"set no_new_privs", func() error {
			const prSetNoNewPrivs = 38
			if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0, 0, 0, 0); e != 0 {
				return e
			}
			return nil
		}},
		{"drop groups", func() error { return syscall.Setgroups(nil) }},
		{"setgid", func() error { return syscall.Setgid(s.GID) }},
		{"setuid", func() error { return syscall.Setuid(s.UID) }},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			return fail(st.what, err)
		}
	}
	return fail("exec "+s.Args[0], syscall.Exec(s.Args[0], s.Args, s.Env))
}

// sandbox is an unpacked image to start processes in.
type sandbox struct {
	root  string
	cfg   imageConfig
	binds [][2]string
	quiet bool // no output in the log when the test fails (probes)
}

// start runs args (the image's Entrypoint+Cmd when nil) in the image with
// the config's Env plus env, as the config's User.
func (c *sandbox) start(t *testing.T, name string, args []string, env map[string]string) *relayProc {
	t.Helper()
	uid, gid, err := imageUser(c.root, c.cfg.Config.User)
	if err != nil {
		t.Fatal(err)
	}
	if args == nil {
		args = append(append([]string{}, c.cfg.Config.Entrypoint...), c.cfg.Config.Cmd...)
	}
	spec := initSpec{Root: c.root, Dir: c.cfg.Config.WorkingDir, UID: uid, GID: gid, Args: args, Binds: c.binds,
		Env: append([]string{}, c.cfg.Config.Env...)}
	for k, v := range env {
		spec.Env = append(spec.Env, k+"="+v)
	}
	// Mount points, as a runtime makes them.
	for _, d := range append([]string{"/proc"}, func() (ds []string) {
		for _, b := range c.binds {
			ds = append(ds, b[1])
		}
		return ds
	}()...) {
		if err := os.MkdirAll(filepath.Join(c.root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	raw, _ := json.Marshal(spec)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &relayProc{out: &syncBuffer{}, exited: make(chan struct{}), addr: env["WALRELAY_HTTP_ADDR"]}
	p.cmd = exec.Command(self)
	p.cmd.Env = []string{imageInitEnv + "=" + string(raw)}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	// N.B. Pdeathsig: a test binary that dies (a go test timeout) takes
	// the container with it instead of leaving walrelay running.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWUTS | syscall.CLONE_NEWIPC,
		Pdeathsig:  syscall.SIGKILL,
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s in the image (needs root for its namespaces): %v", name, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() && !c.quiet {
			t.Logf("%s in the image, output:\n%s", name, p.out.String())
		}
	})
	return p
}

// procStatus reads fields of /proc/PID/status.
func procStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok {
			st[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	return st
}

// rootMountReadOnly reports whether the root of process pid is a read-only
// mount (its /proc/PID/mountinfo line for "/").
func rootMountReadOnly(t *testing.T, pid int) bool {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 5 && f[4] == "/" {
			return strings.HasPrefix(f[5], "ro")
		}
	}
	t.Fatalf("no mount of / in /proc/%d/mountinfo", pid)
	return false
}

// TestImage builds the image with make image and checks it: the OCI tar
// against the specs, byte-for-byte reproducible, the config the Dockerfile
// states, the binary built with the Dockerfile's flags, a layout walrelay
// can run on (and that the checks catch broken ones), and walrelay run in
// the unpacked image against the test bed: as its non-root user, on a
// read-only root, health check, a relayed event, a clean stop as PID 1.
func TestImage(t *testing.T) {
	t.Parallel()
	start := time.Now()
	bin := filepath.Join(t.TempDir(), "walrelay")
	data, out := makeImage(t, t.TempDir(), bin)
	built := time.Since(start)
	img, err := readOCI(data)
	if err != nil {
		t.Fatalf("make image wrote a broken OCI tar: %v\nmake image:\n%s", err, out)
	}
	t.Logf("image %s: tar %.1f MiB, %d layers %.1f MiB compressed, %.1f MiB unpacked; make image took %s",
		img.manifest, mib(len(img.tarBytes)), len(img.layers), mib(int(img.compressed)), mib(int(img.unpacked)), built.Round(100*time.Millisecond))
	root := filepath.Join(t.TempDir(), "rootfs")
	if err := unpack(img.layers, root); err != nil {
		t.Fatal(err)
	}
	cfg := img.config

	t.Run("reproducible", func(t *testing.T) {
		// Another directory, time zone and moment: the same bytes. (The
		// binary is make's own again: go build finds it up to date instead
		// of linking it a second time; its reproducibility is Go's, from
		// -trimpath.)
		again, _ := makeImage(t, t.TempDir(), bin, "TZ=Pacific/Chatham")
		if !bytes.Equal(again, data) {
			other, err := readOCI(again)
			t.Errorf("a second make image wrote other bytes (manifest %s, %v), want the same as the first (%s)", other.manifestOrEmpty(), err, img.manifest)
		}
	})

	t.Run("config is the Dockerfile's", func(t *testing.T) {
		df, err := readDockerfile()
		if err != nil {
			t.Fatal(err)
		}
		c := cfg.Config
		str := func(s []string) string { b, _ := json.Marshal(s); return string(b) }
		user, _ := df.last("USER")
		if c.User != user {
			t.Errorf("image User %q, Dockerfile USER %q", c.User, user)
		}
		for _, f := range []struct {
			cmd string
			got []string
		}{{"ENTRYPOINT", c.Entrypoint}, {"CMD", c.Cmd}} {
			args, _ := df.last(f.cmd)
			want, err := execForm(args)
			if err != nil {
				t.Errorf("Dockerfile %s: %v", f.cmd, err)
			} else if str(f.got) != str(want) {
				t.Errorf("image %s %s, Dockerfile %s", f.cmd, str(f.got), str(want))
			}
		}
		wd, _ := df.last("WORKDIR")
		if c.WorkingDir != wd {
			t.Errorf("image WorkingDir %q, Dockerfile WORKDIR %q", c.WorkingDir, wd)
		}
		ports := map[string]struct{}{}
		env := map[string]string{}
		labels := map[string]string{}
		for _, in := range df.final() {
			switch in.cmd {
			case "EXPOSE":
				for _, p := range strings.Fields(in.args) {
					if !strings.Contains(p, "/") {
						p += "/tcp"
					}
					ports[p] = struct{}{}
				}
			case "ENV", "LABEL":
				m := env
				if in.cmd == "LABEL" {
					m = labels
				}
				for _, w := range shellWords(in.args) {
					k, v, ok := strings.Cut(w, "=")
					if !ok {
						t.Errorf("Dockerfile:%d: %s %s: want key=value pairs", in.line, in.cmd, in.args)
					}
					m[k] = strings.NewReplacer("${VERSION}", testVersion, "$VERSION", testVersion).Replace(v)
				}
			}
		}
		gotPorts := fmt.Sprint(c.ExposedPorts)
		if fmt.Sprint(ports) != gotPorts {
			t.Errorf("image ExposedPorts %s, Dockerfile EXPOSE %v", gotPorts, ports)
		}
		gotEnv := map[string]string{}
		for _, kv := range c.Env {
			k, v, _ := strings.Cut(kv, "=")
			gotEnv[k] = v
		}
		if fmt.Sprint(gotEnv) != fmt.Sprint(env) {
			t.Errorf("image Env %v, Dockerfile ENV %v", gotEnv, env)
		}
		if fmt.Sprint(c.Labels) != fmt.Sprint(labels) {
			t.Errorf("image Labels %v, Dockerfile LABEL %v", c.Labels, labels)
		}
		gb, err := df.goBuild()
		if err != nil {
			t.Fatal(err)
		}
		var copied string
		for _, in := range df.final() {
			if f := strings.Fields(in.args); in.cmd == "COPY" && len(f) == 3 && f[0] == "--from="+gb.stage && f[1] == gb.out {
				copied = f[2]
			}
		}
		if len(c.Entrypoint) == 0 || c.Entrypoint[0] != copied {
			t.Errorf("image Entrypoint %q, the Dockerfile copies the binary to %s", c.Entrypoint, copied)
		}
	})

	t.Run("binary is built as the Dockerfile builds it", func(t *testing.T) {
		df, err := readDockerfile()
		if err != nil {
			t.Fatal(err)
		}
		gb, err := df.goBuild()
		if err != nil {
			t.Fatal(err)
		}
		info, err := buildinfo.ReadFile(filepath.Join(root, filepath.FromSlash(cfg.Config.Entrypoint[0])))
		if err != nil {
			t.Fatalf("the image's entrypoint: %v", err)
		}
		settings := map[string]string{}
		for _, s := range info.Settings {
			settings[s.Key] = s.Value
		}
		want := map[string]string{
			"CGO_ENABLED": gb.env["CGO_ENABLED"],
			"-trimpath":   strconv.FormatBool(gb.trimpath),
			"GOOS":        "linux",
		}
		for k, v := range want {
			if settings[k] != v {
				t.Errorf("the image's binary has build setting %s=%q, the Dockerfile's go build %q", k, settings[k], v)
			}
		}
		// N.B. with -trimpath the build info leaves -ldflags out: its
		// effects are checked instead, the version stamped and, for -s and
		// -w, no symbol table and no DWARF.
		exe := filepath.Join(root, filepath.FromSlash(cfg.Config.Entrypoint[0]))
		out, err := exec.Command(exe, "version").CombinedOutput()
		if got := strings.TrimSpace(string(out)); err != nil || got != "walrelay "+testVersion {
			t.Errorf("the image's walrelay version printed %q (%v), want %q (make image's VERSION)", got, err, "walrelay "+testVersion)
		}
		f, err := elf.Open(exe)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for _, sec := range f.Sections {
			stripped := map[string]string{".symtab": "-s", ".debug_info": "-w", ".zdebug_info": "-w"}
			if flag, ok := stripped[sec.Name]; ok && strings.Contains(gb.ldflags, flag) {
				t.Errorf("the image's binary has section %s, but the Dockerfile links with %s", sec.Name, flag)
			}
		}
		if info.Path != "github.com/walrelay/walrelay/cmd/walrelay" || path.Join("github.com/walrelay/walrelay", gb.pkg) != info.Path {
			t.Errorf("the image's binary is %s, the Dockerfile builds %s", info.Path, gb.pkg)
		}
	})

	t.Run("layout", func(t *testing.T) {
		for _, p := range imageProblems(root, cfg) {
			t.Error(p)
		}
	})

	t.Run("broken images are caught", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			break_ func(root string, cfg *imageConfig) error
			binary bool // it changes the binary's inode: copy it, do not link it
		}{
			{"runs as root", func(_ string, c *imageConfig) error { c.Config.User = "0:0"; return nil }, false},
			{"no user", func(_ string, c *imageConfig) error { c.Config.User = ""; return nil }, false},
			{"user by name", func(_ string, c *imageConfig) error { c.Config.User = "nonroot"; return nil }, false},
			{"user not in passwd", func(root string, _ *imageConfig) error {
				return os.WriteFile(filepath.Join(root, "etc/passwd"), []byte("root:x:0:0:root:/root:/sbin/nologin\n"), 0o644)
			}, false},
			{"no CA file", func(root string, _ *imageConfig) error {
				return os.Remove(filepath.Join(root, "etc/ssl/certs/ca-certificates.crt"))
			}, false},
			{"empty CA file", func(root string, _ *imageConfig) error {
				return os.WriteFile(filepath.Join(root, "etc/ssl/certs/ca-certificates.crt"), nil, 0o644)
			}, false},
			{"CA file unreadable", func(root string, _ *imageConfig) error {
				return os.Chmod(filepath.Join(root, "etc/ssl/certs/ca-certificates.crt"), 0o600)
			}, false},
			{"no binary", func(root string, c *imageConfig) error {
				return os.Remove(filepath.Join(root, c.Config.Entrypoint[0]))
			}, false},
			{"binary not executable", func(root string, c *imageConfig) error {
				return os.Chmod(filepath.Join(root, c.Config.Entrypoint[0]), 0o744)
			}, true},
			{"dynamically linked binary", func(root string, c *imageConfig) error {
				exe, err := exec.LookPath("ls")
				if err != nil {
					return err
				}
				b, err := os.ReadFile(exe)
				if err != nil {
					return err
				}
				return os.WriteFile(filepath.Join(root, c.Config.Entrypoint[0]), b, 0o755)
			}, true},
			{"no /tmp", func(root string, _ *imageConfig) error { return os.Remove(filepath.Join(root, "tmp")) }, false},
			{"/tmp not sticky", func(root string, _ *imageConfig) error { return os.Chmod(filepath.Join(root, "tmp"), 0o777) }, false},
			{"home not the user's", func(root string, c *imageConfig) error {
				return os.Chown(filepath.Join(root, c.Config.WorkingDir), 0, 0)
			}, false},
			{"set-uid file", func(root string, c *imageConfig) error {
				return os.Chmod(filepath.Join(root, c.Config.Entrypoint[0]), 0o755|fs.ModeSetuid)
			}, true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := t.TempDir()
				exe := filepath.Join(root, filepath.FromSlash(cfg.Config.Entrypoint[0]))
				if err := cloneRoot(root, r, func(p string) bool { return p == exe && !tc.binary }); err != nil {
					t.Fatal(err)
				}
				c := cfg
				c.Config.Env = append([]string{}, cfg.Config.Env...)
				if err := tc.break_(r, &c); err != nil {
					t.Fatal(err)
				}
				if p := imageProblems(r, c); len(p) == 0 {
					t.Errorf("an image with %s passes the layout checks", tc.name)
				} else {
					t.Logf("caught: %s", strings.Join(p, "; "))
				}
			})
		}
	})

	// walrelay's TLS verification in the image uses the image's CA bundle:
	// a server signed by a CA outside it is refused, and trusted once that
	// CA is added to the bundle at its path in the image.
	t.Run("TLS trusts the image's CA bundle", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Fatal("running the image needs root (mount and PID namespaces, chroot, setuid): run the test as root, as CI does")
		}
		caPEM, cert := testCA(t)
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ready") }))
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
		srv.StartTLS()
		defer srv.Close()
		args := []string{cfg.Config.Entrypoint[0], "health", "--url", srv.URL + "/readyz"}
		ctr := &sandbox{root: root, cfg: cfg}
		err, out := ctr.runOnce(t, "walrelay health (CA not in the bundle)", args, nil)
		if err == nil || !strings.Contains(out, "x509") {
			t.Errorf("walrelay health against a server of an unknown CA: %v, %q; want a certificate verification failure", err, out)
		}

		caFile, ok := envValue(cfg.Config.Env, "SSL_CERT_FILE")
		if !ok {
			t.Fatal("the image's config sets no SSL_CERT_FILE")
		}
		bundle, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(caFile)))
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		os.Chmod(dir, 0o755)
		if err := os.WriteFile(filepath.Join(dir, path.Base(caFile)), append(bundle, caPEM...), 0o644); err != nil {
			t.Fatal(err)
		}
		ctr.binds = [][2]string{{dir, path.Dir(caFile)}}
		if err, out := ctr.runOnce(t, "walrelay health (CA in the bundle)", args, nil); err != nil {
			t.Errorf("walrelay health with the server's CA added to the image's bundle: %v, %q; want 200", err, out)
		}
	})

	t.Run("runs against the test bed", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Fatal("running the image needs root (mount and PID namespaces, chroot, setuid): run the test as root, as CI does")
		}
		b := testbed.Get(t)
		dsn := b.NewDatabase(t)
		b.Exec(t, dsn, readInitSQL(t))
		suffix := make([]byte, 4)
		rand.Read(suffix)
		uniq := hex.EncodeToString(suffix)

		_, gid, err := imageUser(root, cfg.Config.User)
		if err != nil {
			t.Fatal(err)
		}
		// The Dockerfile's USER is the truth for who the process must be.
		dfUser := ""
		if df, err := readDockerfile(); err == nil {
			dfUser, _ = df.last("USER")
		}
		wantUID, wantGID, _ := strings.Cut(dfUser, ":")

		// The connection string as the Kubernetes example passes it: a file
		// of a Secret volume (root-owned, group fsGroup, mode 0440).
		env := map[string]string{}
		for k, v := range readCompose(t).Services["walrelay"].Environment {
			if strings.HasPrefix(k, envPrefix) && k != "WALRELAY_PG_URL" {
				env[k] = v
			}
		}
		pgURLFile := manifestEnv(t)["WALRELAY_PG_URL_FILE"]
		if !path.IsAbs(pgURLFile) {
			t.Fatalf("deploy/kubernetes/walrelay.yaml sets WALRELAY_PG_URL_FILE=%q, want an absolute path", pgURLFile)
		}
		secrets := t.TempDir()
		if err := os.WriteFile(filepath.Join(secrets, path.Base(pgURLFile)), []byte(dsn+"\n"), 0o440); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{secrets, filepath.Join(secrets, path.Base(pgURLFile))} {
			if err := os.Chown(p, 0, gid); err != nil {
				t.Fatal(err)
			}
		}
		os.Chmod(secrets, 0o750)
		ctr := &sandbox{root: root, cfg: cfg, binds: [][2]string{{secrets, path.Dir(pgURLFile)}}}
		env["WALRELAY_PG_URL_FILE"] = pgURLFile
		env["WALRELAY_BROKERS"] = strings.Join(b.Brokers(), ",")
		env["WALRELAY_SLOT"] = "image_" + uniq
		env["WALRELAY_HTTP_ADDR"] = freeAddr(t)
		// As the Kubernetes example runs it: the slot made beforehand
		// (walrelay setup), WALRELAY_CREATE=false.
		env["WALRELAY_CREATE"] = manifestEnv(t)["WALRELAY_CREATE"]
		b.Exec(t, dsn, fmt.Sprintf(`SELECT pg_create_logical_replication_slot('%s', 'pgoutput')`, env["WALRELAY_SLOT"]))

		relay := ctr.start(t, "walrelay run", nil, env)
		pid := relay.cmd.Process.Pid
		probe := *ctr
		probe.quiet = true
		health := func() error {
			hp := probe.start(t, "walrelay health", []string{cfg.Config.Entrypoint[0], "health"},
				map[string]string{"WALRELAY_HTTP_ADDR": env["WALRELAY_HTTP_ADDR"]})
			select {
			case <-hp.exited:
			case <-time.After(15 * time.Second):
				return errors.New("walrelay health did not exit within 15s")
			}
			if hp.err != nil {
				return fmt.Errorf("walrelay health in the image: %v: %s", hp.err, strings.TrimSpace(hp.out.String()))
			}
			return nil
		}
		waitFor(t, relay, 60*time.Second, "walrelay health, run in the image, to pass", health)

		st := procStatus(t, pid)
		t.Logf("walrelay in the image: host PID %d, Uid %s, Gid %s, Groups %q, CapEff %s, NSpid %s", pid, st["Uid"], st["Gid"], st["Groups"], st["CapEff"], st["NSpid"])
		if want := strings.Repeat(wantUID+" ", 3) + wantUID; st["Uid"] != want || wantUID == "0" || wantUID == "" {
			t.Errorf("walrelay runs with Uid %q, want %q (the Dockerfile's USER %q), never 0", st["Uid"], want, dfUser)
		}
		if want := strings.Repeat(wantGID+" ", 3) + wantGID; st["Gid"] != want {
			t.Errorf("walrelay runs with Gid %q, want %q (the Dockerfile's USER %q)", st["Gid"], want, dfUser)
		}
		if st["CapEff"] != "0000000000000000" {
			t.Errorf("walrelay has effective capabilities %s, want none", st["CapEff"])
		}
		if f := strings.Fields(st["NSpid"]); len(f) != 2 || f[1] != "1" {
			t.Errorf("NSpid %q: walrelay is not PID 1 of its own PID namespace (the test's container is not set up)", st["NSpid"])
		}
		if !rootMountReadOnly(t, pid) {
			t.Error("walrelay's root is not mounted read-only (the test's container is not set up)")
		}

		aggType := "image_" + uniq
		topic := "outbox.event." + aggType
		var before string
		if err := b.QueryRow(t, dsn, `SELECT pg_current_wal_lsn()::text`).Scan(&before); err != nil {
			t.Fatal(err)
		}
		b.Exec(t, dsn, strings.Replace(placeOrderSQL, "'order'", "'"+aggType+"'", 1))
		r := consumeKey(t, b, topic, "1")
		var payload struct {
			OrderID  int    `json:"orderId"`
			Customer string `json:"customer"`
		}
		if err := json.Unmarshal(r.Value, &payload); err != nil || payload.OrderID != 1 || payload.Customer != "alice" {
			t.Errorf("record value %s (%v), want the order as JSON", r.Value, err)
		}
		if typ, _ := header(r, "eventType"); typ != "OrderCreated" {
			t.Errorf("record header eventType = %q, want OrderCreated", typ)
		}
		// N.B. PID 1 gets only the signals it handles: a clean exit on
		// SIGTERM shows walrelay handles it as a container's init.
		if code := relay.stop(t); code != 0 {
			t.Errorf("walrelay in the image exited %d on SIGTERM, want 0", code)
		}
		// The slot was confirmed past the event's commit.
		var confirmed string
		var past bool
		if err := b.QueryRow(t, dsn, `SELECT confirmed_flush_lsn::text, confirmed_flush_lsn > $2::pg_lsn FROM pg_replication_slots WHERE slot_name = $1`,
			env["WALRELAY_SLOT"], before).Scan(&confirmed, &past); err != nil {
			t.Fatal(err)
		}
		if !past {
			t.Errorf("slot %s confirmed %s after the relay stopped, want past %s (before the event's commit)", env["WALRELAY_SLOT"], confirmed, before)
		}
	})
}

// runOnce runs args in the image and returns its exit error and output.
func (c *sandbox) runOnce(t *testing.T, name string, args []string, env map[string]string) (error, string) {
	t.Helper()
	p := c.start(t, name, args, env)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s in the image did not exit within 30s", name)
	}
	return p.err, strings.TrimSpace(p.out.String())
}

// testCA is a CA and a server certificate for 127.0.0.1 that it signed.
func testCA(t *testing.T) (caPEM []byte, server tls.Certificate) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "walrelay image test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func (i *ociImage) manifestOrEmpty() string {
	if i == nil {
		return ""
	}
	return i.manifest
}

func mib(n int) float64 { return float64(n) / (1 << 20) }
