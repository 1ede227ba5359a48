package kubernetes_test

import (
	"regexp"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// digestRef is an image reference pinned by digest; digest is a kustomize images: digest.
var (
	digestRef = regexp.MustCompile(`@sha256:[0-9a-f]{64}$`)
	digest    = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

// TestImagesArePinned: every image of the kit is pinned by digest, so a tag moved on its registry
// changes nothing that runs. A public image carries its digest in its manifest; the bot's own,
// which each deployer builds and pushes, is named in kustomization.yaml's images:, where the kit
// says how to fill its digest (kustomize pins the image to it). An entry's digest, once there,
// must be one.
func TestImagesArePinned(t *testing.T) {
	var k kustomization
	decode(t, "kustomization.yaml", &k)
	bot, _ := deployment(t)
	r, _, _ := redis(t)
	for _, d := range []*appsv1.Deployment{bot, r} {
		spec := d.Spec.Template.Spec
		for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
			i := slices.IndexFunc(k.Images, func(im kustomizeImage) bool { return im.Name == c.Image })
			switch {
			case digestRef.MatchString(c.Image):
			case i < 0:
				t.Errorf("%s container %s: image %q is neither pinned by digest nor named in kustomization.yaml's images:",
					d.Name, c.Name, c.Image)
			case k.Images[i].Digest != "" && !digest.MatchString(k.Images[i].Digest):
				t.Errorf("kustomization.yaml images: %s digest %q is not sha256:<64 hex digits>", c.Image, k.Images[i].Digest)
			}
		}
	}
}
