package kubernetes_test

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestImageTagIsPulled: with imagePullPolicy: IfNotPresent, Kubernetes' own rule (":latest" means
// Always) is off, so kustomization.yaml must not ship a mutable tag: a new build pushed under the
// same tag would not roll out with `kubectl apply -k`, and a node that has the old image would keep
// running it after `kubectl rollout restart`.
func TestImageTagIsPulled(t *testing.T) {
	var k kustomization
	decode(t, "kustomization.yaml", &k)
	_, c := deployment(t)
	i := slices.IndexFunc(k.Images, func(i kustomizeImage) bool { return i.Name == c.Image })
	if i < 0 {
		t.Fatalf("no images: entry for %q", c.Image)
	}
	if tag := k.Images[i].NewTag; (tag == "" || tag == "latest") && c.ImagePullPolicy == corev1.PullIfNotPresent {
		t.Errorf("image %s:%s (a mutable tag) with imagePullPolicy %s: new builds are never pulled", k.Images[i].NewName, tag, c.ImagePullPolicy)
	}
}

// TestRolloutFitsSocketModeLimit: Slack allows 10 Socket Mode connections per app and each
// replica holds one. The rolling update adds maxSurge pods, each connecting before an old one
// stops, so the most replicas README.md allows ("You may run more, up to N") plus maxSurge must
// fit in 10: else the new pod is refused (too_many_websockets), never gets ready, and with
// maxUnavailable: 0 the rollout stalls.
func TestRolloutFitsSocketModeLimit(t *testing.T) {
	const slackLimit = 10
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`You may run more, up to (\d+)`).FindSubmatch(readme)
	if m == nil {
		t.Fatal(`README.md does not say "You may run more, up to N"`)
	}
	documentedMaxReplicas, _ := strconv.Atoi(string(m[1]))
	d, _ := deployment(t)
	surge := 0
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil && ru.MaxSurge != nil {
		surge = ru.MaxSurge.IntValue()
	}
	if documentedMaxReplicas+surge > slackLimit {
		t.Errorf("up to %d replicas + maxSurge %d = %d Socket Mode connections during a rollout; Slack allows %d",
			documentedMaxReplicas, surge, documentedMaxReplicas+surge, slackLimit)
	}
}
