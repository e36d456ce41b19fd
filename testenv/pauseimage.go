package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"time"
)

// pauseImage is the name of the node's sandbox image, built locally from
// testenv/pause/pause.c (no registry can be reached to pull
// registry.k8s.io/pause). The localhost/ prefix keeps it from ever being
// mistaken for, or pulled as, a public image.
const pauseImage = "localhost/kube-testenv/pause:1"

// ociDescriptor is a content descriptor of the OCI image spec.
type ociDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int               `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// writePauseImage writes an OCI image layout archive (what `ctr images
// import` reads) holding one image, pauseImage, whose only file is the
// static binary at binary, run as its entrypoint.
func writePauseImage(binary, archive string) error {
	program, err := os.ReadFile(binary)
	if err != nil {
		return fmt.Errorf("reading the pause program %s: %w (build it with `make node-binaries`)", binary, err)
	}
	// The one layer: /pause. Fixed times keep the image the same across
	// builds of the same binary.
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	if err := lw.WriteHeader(&tar.Header{
		Name: "pause", Mode: 0o755, Size: int64(len(program)), Typeflag: tar.TypeReg,
		ModTime: time.Unix(0, 0),
	}); err != nil {
		return err
	}
	if _, err := lw.Write(program); err != nil {
		return err
	}
	if err := lw.Close(); err != nil {
		return err
	}
	layerDigest := digest(layer.Bytes())
	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"config":       map[string]any{"Entrypoint": []string{"/pause"}, "User": "65535:65535"},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{layerDigest}},
	})
	if err != nil {
		return err
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        ociDescriptor{MediaType: "application/vnd.oci.image.config.v1+json", Digest: digest(config), Size: len(config)},
		"layers":        []ociDescriptor{{MediaType: "application/vnd.oci.image.layer.v1.tar", Digest: layerDigest, Size: layer.Len()}},
	})
	if err != nil {
		return err
	}
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"manifests": []ociDescriptor{{
			MediaType: "application/vnd.oci.image.manifest.v1+json",
			Digest:    digest(manifest), Size: len(manifest),
			Annotations: map[string]string{"io.containerd.image.name": pauseImage},
		}},
	})
	if err != nil {
		return err
	}

	out, err := os.Create(archive)
	if err != nil {
		return err
	}
	defer out.Close()
	aw := tar.NewWriter(out)
	files := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{blobPath(layerDigest), layer.Bytes()},
		{blobPath(digest(config)), config},
		{blobPath(digest(manifest)), manifest},
	}
	for _, f := range files {
		if err := aw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
		if _, err := aw.Write(f.data); err != nil {
			return err
		}
	}
	if err := aw.Close(); err != nil {
		return err
	}
	return out.Close()
}

func digest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func blobPath(digest string) string {
	return "blobs/sha256/" + digest[len("sha256:"):]
}
