package kubernetes_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// botNetworkPolicy decodes networkpolicy.yaml.
func botNetworkPolicy(t *testing.T) *networkingv1.NetworkPolicy {
	t.Helper()
	var np networkingv1.NetworkPolicy
	decode(t, "networkpolicy.yaml", &np)
	if np.APIVersion != "networking.k8s.io/v1" || np.Kind != "NetworkPolicy" {
		t.Fatalf("networkpolicy.yaml is %s %s, want networking.k8s.io/v1 NetworkPolicy", np.APIVersion, np.Kind)
	}
	return &np
}

// portIs reports whether a policy port is port/protocol (a named port: the container port of
// that name).
func portIs(p networkingv1.NetworkPolicyPort, c *corev1.Container, port int32, protocol corev1.Protocol) bool {
	if p.Protocol == nil || *p.Protocol != protocol || p.Port == nil || p.EndPort != nil {
		return false
	}
	if p.Port.Type == intstr.Int {
		return p.Port.IntVal == port
	}
	return c != nil && slices.ContainsFunc(c.Ports, func(cp corev1.ContainerPort) bool {
		return cp.Name == p.Port.StrVal && cp.ContainerPort == port && cp.Protocol == protocol
	})
}

// The bot's pods are isolated both ways: in, only the scraper on the metrics port; out, HTTPS, DNS
// and the kit's Redis on its port, nothing else.
func TestBotNetworkPolicy(t *testing.T) {
	np := botNetworkPolicy(t)
	d, c := deployment(t)
	r, svc, _ := redis(t)
	ps := np.Spec.PodSelector
	sel := matchLabels(t, "networkpolicy.yaml podSelector", ps.MatchLabels, len(ps.MatchExpressions))
	if !selects(sel, d.Spec.Template.Labels) {
		t.Errorf("the policy selects %v, not the bot's pods %v", sel, d.Spec.Template.Labels)
	}
	if selects(sel, r.Spec.Template.Labels) {
		t.Errorf("the policy selects the Redis pods %v too", r.Spec.Template.Labels)
	}
	want := []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
	if !slices.Equal(np.Spec.PolicyTypes, want) {
		t.Errorf("policyTypes %v, want %v: both ways are restricted", np.Spec.PolicyTypes, want)
	}

	// In: one rule, the scraper (a namespace and its pods, both by label) to the metrics port.
	health := int32(0)
	if c.ReadinessProbe != nil && c.ReadinessProbe.HTTPGet != nil {
		port := c.ReadinessProbe.HTTPGet.Port
		i := slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == port.StrVal })
		if port.Type == intstr.Int {
			health = port.IntVal
		} else if i >= 0 {
			health = c.Ports[i].ContainerPort
		}
	}
	if health == 0 {
		t.Fatal("the bot's readiness probe names no port of its container")
	}
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].Ports) != 1 || len(np.Spec.Ingress[0].From) == 0 {
		t.Fatal("want one ingress rule: from the scraper, to the metrics port")
	}
	in := np.Spec.Ingress[0]
	if !portIs(in.Ports[0], c, health, corev1.ProtocolTCP) {
		t.Errorf("the ingress rule's port is not the metrics port %d/TCP", health)
	}
	for i, from := range in.From {
		if from.IPBlock != nil || from.NamespaceSelector == nil || from.PodSelector == nil {
			t.Fatalf("ingress peer %d: want a namespaceSelector and a podSelector together (the scraper's pods in its namespace)", i)
		}
		matchLabels(t, "the ingress peer's namespaceSelector", from.NamespaceSelector.MatchLabels, len(from.NamespaceSelector.MatchExpressions))
		matchLabels(t, "the ingress peer's podSelector", from.PodSelector.MatchLabels, len(from.PodSelector.MatchExpressions))
	}

	// Out: every rule names its ports (a rule without ports opens them all); 443, DNS and Redis.
	type hole struct {
		port     int32
		protocol corev1.Protocol
	}
	need := []hole{{443, corev1.ProtocolTCP}, {53, corev1.ProtocolUDP}, {53, corev1.ProtocolTCP}}
	found := map[hole]bool{}
	redisReached := false
	for i, rule := range np.Spec.Egress {
		if len(rule.Ports) == 0 {
			t.Errorf("egress rule %d names no port: it lets the bot reach anything", i)
		}
		for _, p := range rule.Ports {
			for _, h := range need {
				if portIs(p, nil, h.port, h.protocol) && len(rule.To) == 0 {
					found[h] = true
				}
			}
			if !portIs(p, nil, svc.Spec.Ports[0].Port, corev1.ProtocolTCP) || len(rule.To) != 1 {
				continue
			}
			to := rule.To[0]
			if to.PodSelector != nil && to.NamespaceSelector == nil && to.IPBlock == nil &&
				selects(matchLabels(t, "the Redis egress peer", to.PodSelector.MatchLabels, len(to.PodSelector.MatchExpressions)), r.Spec.Template.Labels) {
				redisReached = true
			}
		}
		if len(rule.To) == 0 && !slices.ContainsFunc(rule.Ports, func(p networkingv1.NetworkPolicyPort) bool {
			return slices.ContainsFunc(need, func(h hole) bool { return portIs(p, nil, h.port, h.protocol) })
		}) {
			t.Errorf("egress rule %d opens a port to anywhere that is neither HTTPS nor DNS", i)
		}
	}
	for _, h := range need {
		if !found[h] {
			t.Errorf("no egress to port %d/%s anywhere (Slack and the model over HTTPS, DNS)", h.port, h.protocol)
		}
	}
	if !redisReached {
		t.Errorf("no egress rule lets the bot reach the Redis pods %v on %d/TCP", r.Spec.Template.Labels, svc.Spec.Ports[0].Port)
	}
}
