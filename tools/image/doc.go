// Command image writes walrelay's container image as an OCI image layout in
// one tar file, without a container engine: `make image` builds the static
// binary and runs it.
//
// Input: a static linux binary of walrelay (CGO_ENABLED=0), the build
// machine's CA bundle and SOURCE_DATE_EPOCH. Output: a tar holding oci-layout,
// index.json and blobs/sha256/ (an OCI image layout, as skopeo's oci-archive:
// and docker load read it), plus a Docker-style manifest.json naming the same
// blobs (as crane push and older docker load read it). Invariant: the same
// inputs give the same bytes (every time stamp is SOURCE_DATE_EPOCH, every
// owner fixed), and the image's config is the one ../../Dockerfile states
// (test/compose compares them).
//
// It is a module of its own so that go-containerregistry never becomes a
// dependency of walrelay's.
package main
