package kubernetes_test

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
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

// TestRolloutFitsSocketModeLimit: Slack allows 10 Socket Mode connections per app. Each replica
// holds one, and two for a few seconds while Slack refreshes it (the bot opens the next connection
// before it closes the old one); a rolling update adds maxSurge pods, each connecting before an old
// one stops. So (replicas + maxSurge) x 2 must fit in 10, for the Deployment's replicas and for the
// most README.md allows ("You may run up to N replicas"): else a refresh or a new pod is refused
// (too_many_websockets), and a new pod that never gets ready stalls the rollout (maxUnavailable: 0).
func TestRolloutFitsSocketModeLimit(t *testing.T) {
	const (
		slackLimit        = 10
		connsPerReplica   = 2     // during a refresh
		defaultSurgeShare = "25%" // Kubernetes' default maxSurge
	)
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`You may run\s+up\s+to\s+(\d+)\s+replicas`).FindSubmatch(readme) // wrapped anywhere
	if m == nil {
		t.Fatal(`README.md does not say "You may run up to N replicas"`)
	}
	documentedMaxReplicas, _ := strconv.Atoi(string(m[1]))
	d, _ := deployment(t)
	if d.Spec.Replicas == nil {
		t.Fatal("replicas is not set")
	}
	for _, replicas := range []int{int(*d.Spec.Replicas), documentedMaxReplicas} {
		surge := 0 // Recreate stops the old pods first
		if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
			share := defaultSurgeShare
			if ru := d.Spec.Strategy.RollingUpdate; ru != nil && ru.MaxSurge != nil {
				share = ru.MaxSurge.String()
			}
			surge = scaled(t, share, replicas, true)
		}
		if conns := (replicas + surge) * connsPerReplica; conns > slackLimit {
			t.Errorf("%d replicas + maxSurge %d, %d Socket Mode connections each while Slack refreshes them: %d; Slack allows %d per app",
				replicas, surge, connsPerReplica, conns, slackLimit)
		}
	}
}
