// Package kubernetes_test checks the Kubernetes manifests without a cluster: each file decodes
// strictly into the Kubernetes API types (an unknown or misspelt field fails), and what they
// say agrees with the bot: setting names, the health listener's port and paths, the shutdown
// grace, the Secret's keys, the ConfigMap's override file, the security settings, and the
// replicas' shared state (the Redis of redis.yaml, the disruption budget, STATE_DIR).
package kubernetes_test

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"

	"github.com/llmbot/llmbot/access"
)

// decode reads a manifest strictly into v: unknown fields and duplicate keys are errors.
func decode(t *testing.T, file string, v any) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, v); err != nil {
		t.Fatalf("%s does not decode strictly into %T: %v", file, v, err)
	}
}

// docSeparator is the line between two YAML documents in one file; commentLine is a line with
// nothing but a comment (a file's trailing --- leaves a document of those, or of nothing).
var (
	docSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)
	commentLine  = regexp.MustCompile(`(?m)^\s*#.*$`)
)

// decodeDocs reads a file of several YAML documents strictly, the i-th into vs[i]; the file must
// hold exactly len(vs) of them.
func decodeDocs(t *testing.T, file string, vs ...any) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var docs [][]byte
	for _, d := range docSeparator.Split(string(data), -1) {
		if b := []byte(d); len(bytes.TrimSpace(commentLine.ReplaceAll(b, nil))) > 0 {
			docs = append(docs, b)
		}
	}
	if len(docs) != len(vs) {
		t.Fatalf("%s holds %d documents, want %d", file, len(docs), len(vs))
	}
	for i, d := range docs {
		if err := yaml.UnmarshalStrict(d, vs[i]); err != nil {
			t.Fatalf("%s document %d does not decode strictly into %T: %v", file, i+1, vs[i], err)
		}
	}
}

// setting is one of the bot's settings, from the tags of cmd/llmbot's Config.
type setting struct {
	def    string
	secret bool
}

// goRuntime are environment variables read by the Go runtime, not by the bot.
var goRuntime = []string{"GOMEMLIMIT", "GOMAXPROCS", "GOGC"}

// settings reads the names, defaults and secrecy of the bot's settings from the struct tags of
// Config in cmd/llmbot/config.go (the source --help prints from), by parsing the file: no build
// of the command, and no dependence on its other files compiling.
func settings(t *testing.T) map[string]setting {
	t.Helper()
	path := filepath.Join("..", "..", "cmd", "llmbot", "config.go")
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]setting{}
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != "Config" {
			return true
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			t.Fatalf("%s: Config is not a struct", path)
		}
		for _, field := range st.Fields.List {
			if field.Tag == nil {
				continue
			}
			raw, err := strconv.Unquote(field.Tag.Value)
			if err != nil {
				t.Fatal(err)
			}
			tag := reflect.StructTag(raw)
			if name := tag.Get("envconfig"); name != "" {
				out[name] = setting{def: tag.Get("default"), secret: tag.Get("secret") == "true"}
			}
		}
		return false
	})
	if len(out) < 10 || out["SLACK_BOT_TOKEN"].secret != true {
		t.Fatalf("read %d settings from %s; the Config struct or its tags changed shape", len(out), path)
	}
	return out
}

func deployment(t *testing.T) (*appsv1.Deployment, *corev1.Container) {
	t.Helper()
	var d appsv1.Deployment
	decode(t, "deployment.yaml", &d)
	if d.APIVersion != "apps/v1" || d.Kind != "Deployment" {
		t.Fatalf("deployment.yaml is %s %s, want apps/v1 Deployment", d.APIVersion, d.Kind)
	}
	if n := len(d.Spec.Template.Spec.Containers); n != 1 {
		t.Fatalf("deployment has %d containers, want 1", n)
	}
	return &d, &d.Spec.Template.Spec.Containers[0]
}

func env(c *corev1.Container, name string) (corev1.EnvVar, bool) {
	i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name })
	if i < 0 {
		return corev1.EnvVar{}, false
	}
	return c.Env[i], true
}

func secretExample(t *testing.T) *corev1.Secret {
	t.Helper()
	var s corev1.Secret
	decode(t, "secret.example.yaml", &s)
	if s.APIVersion != "v1" || s.Kind != "Secret" {
		t.Fatalf("secret.example.yaml is %s %s, want v1 Secret", s.APIVersion, s.Kind)
	}
	return &s
}

func TestDeploymentShape(t *testing.T) {
	d, c := deployment(t)
	if d.Spec.Replicas == nil {
		t.Error("replicas is not set; want 2 by default: a spare during drains and rollouts")
	} else if *d.Spec.Replicas != 2 {
		t.Errorf("replicas = %d, want 2 by default: a spare during drains and rollouts", *d.Spec.Replicas)
	}
	sel := d.Spec.Selector.MatchLabels
	for k, v := range sel {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("selector %s=%s does not match the pod template's labels %v", k, v, d.Spec.Template.Labels)
		}
	}
	if len(sel) == 0 {
		t.Error("the selector matches nothing")
	}
	if c.Image == "" {
		t.Error("the container has no image")
	}
	if ru := d.Spec.Strategy.RollingUpdate; ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 0 {
		t.Error("rolling updates must keep the old pod until the new one is ready (maxUnavailable: 0)")
	}
	if a := d.Spec.Template.Spec.AutomountServiceAccountToken; a == nil || *a {
		t.Error("automountServiceAccountToken must be false: the bot never calls the Kubernetes API")
	}
}

// The probes reach the health listener where HEALTH_ADDR puts it, on the paths ops.Server serves.
func TestProbes(t *testing.T) {
	_, c := deployment(t)
	addr, ok := env(c, "HEALTH_ADDR")
	if !ok || addr.Value == "" {
		t.Fatal("HEALTH_ADDR is not set: the health listener is off by default")
	}
	_, portText, found := strings.Cut(addr.Value, ":")
	port, err := strconv.Atoi(portText)
	if !found || err != nil {
		t.Fatalf("HEALTH_ADDR = %q, want host:port", addr.Value)
	}
	i := slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.ContainerPort == int32(port) })
	if i < 0 {
		t.Fatalf("no container port %d (HEALTH_ADDR)", port)
	}
	portName := c.Ports[i].Name

	probes := []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{
		{"readinessProbe", c.ReadinessProbe, "/readyz"},
		{"livenessProbe", c.LivenessProbe, "/healthz"},
	}
	for _, p := range probes {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s: missing or not an httpGet probe", p.name)
			continue
		}
		g := p.probe.HTTPGet
		if g.Path != p.path {
			t.Errorf("%s path = %q, want %q", p.name, g.Path, p.path)
		}
		if g.Port.String() != portName && g.Port.IntValue() != port {
			t.Errorf("%s port = %s, want %d (%s)", p.name, g.Port.String(), port, portName)
		}
		if p.probe.TimeoutSeconds <= 0 || p.probe.PeriodSeconds <= 0 {
			t.Errorf("%s: set timeoutSeconds and periodSeconds", p.name)
		}
	}
	// A Slack outage must not restart the pod: the probes that restart it (liveness, startup)
	// fail only when the process does.
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.StartupProbe} {
		if p != nil && p.HTTPGet != nil && p.HTTPGet.Path == "/readyz" {
			t.Error("a liveness or startup probe on /readyz would restart the bot when Slack is unreachable")
		}
	}
}

// Every environment variable is a setting of the bot (or of the Go runtime), and every secret
// setting comes from the Secret, never as a literal.
func TestEnvAgreesWithSettings(t *testing.T) {
	known := settings(t)
	_, c := deployment(t)
	seen := map[string]bool{}
	for _, e := range c.Env {
		if seen[e.Name] {
			t.Errorf("%s is set twice", e.Name)
		}
		seen[e.Name] = true
		s, isSetting := known[e.Name]
		if !isSetting && !slices.Contains(goRuntime, e.Name) {
			t.Errorf("env %s is not a setting of the bot (see llmbot --help)", e.Name)
		}
		if s.secret && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
			t.Errorf("env %s is secret: it must come from a secretKeyRef", e.Name)
		}
		if e.Value != "" && looksSecret(e.Value) {
			t.Errorf("env %s holds what looks like a credential", e.Name)
		}
	}
	for _, name := range []string{"SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"} {
		if !seen[name] {
			t.Errorf("%s is not set", name)
		}
	}
	if len(c.EnvFrom) > 0 {
		t.Error("envFrom hides which settings are set; list env explicitly")
	}
}

// secretKeyRefs name the example Secret and keys it has; its values are placeholders.
func TestSecretRefsMatchExample(t *testing.T) {
	s := secretExample(t)
	_, c := deployment(t)
	refs := 0
	for _, e := range c.Env {
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			continue
		}
		refs++
		ref := e.ValueFrom.SecretKeyRef
		if ref.Name != s.Name {
			t.Errorf("env %s reads Secret %q, but the example Secret is %q", e.Name, ref.Name, s.Name)
		}
		if _, ok := s.StringData[ref.Key]; !ok {
			t.Errorf("env %s reads key %q, which secret.example.yaml lacks", e.Name, ref.Key)
		}
	}
	if refs < 2 {
		t.Errorf("%d secretKeyRefs, want at least the two Slack tokens", refs)
	}
	if len(s.Data) > 0 {
		t.Error("secret.example.yaml uses data (base64); use stringData so the placeholders are readable")
	}
	for k, v := range s.StringData {
		if v != "" && !strings.Contains(v, "REPLACE-ME") {
			t.Errorf("secret.example.yaml %s = %q, want a REPLACE-ME placeholder", k, v)
		}
		if looksSecret(v) {
			t.Errorf("secret.example.yaml %s looks like a real credential", k)
		}
	}
}

// credential matches real-looking Slack tokens and API keys (placeholders do not).
var credential = regexp.MustCompile(`xox[abposer]-[0-9]+-|xapp-[0-9]-|sk-[A-Za-z0-9_-]{16,}|[A-Za-z0-9+/]{40,}`)

func looksSecret(v string) bool { return credential.MatchString(v) }

func TestLooksSecret(t *testing.T) {
	tests := []struct {
		v    string
		want bool
	}{
		{"xoxb-REPLACE-ME", false},
		{"xapp-REPLACE-ME", false},
		{"REPLACE-ME", false},
		{"8s", false},
		{"xoxb-1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", true},
		{"xapp-1-A0123-1234567890-abcdef", true},
		{"sk-proj-abcdefghijklmnopqrstuvwxyz", true},
	}
	for _, tt := range tests {
		if got := looksSecret(tt.v); got != tt.want {
			t.Errorf("looksSecret(%q) = %v, want %v", tt.v, got, tt.want)
		}
	}
}

func TestSecurityContext(t *testing.T) {
	d, c := deployment(t)
	lockedDown(t, "llmbot", &d.Spec.Template.Spec, c)
	if pod := d.Spec.Template.Spec.SecurityContext; pod == nil || pod.RunAsUser == nil || *pod.RunAsUser != 65532 {
		t.Error("pod: runAsUser must be 65532, the image's nonroot user (Dockerfile USER)")
	}
	// The image's user must be the one the manifest runs as.
	dockerfile, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^USER 65532(:65532)?\s*$`).Match(dockerfile) {
		t.Error("the Dockerfile's USER is not 65532: update runAsUser to match")
	}
}

// lockedDown checks what every pod of the kit runs with: a non-root user, the runtime's default
// seccomp profile, no privilege escalation, a read-only root filesystem and no capabilities.
func lockedDown(t *testing.T, name string, spec *corev1.PodSpec, c *corev1.Container) {
	t.Helper()
	pod := spec.SecurityContext
	if pod == nil || pod.RunAsNonRoot == nil || !*pod.RunAsNonRoot {
		t.Errorf("%s pod: runAsNonRoot must be true", name)
	}
	if pod == nil || pod.RunAsUser == nil || *pod.RunAsUser == 0 {
		t.Errorf("%s pod: runAsUser must be a non-root user ID (runAsNonRoot cannot check a user name)", name)
	}
	if pod == nil || pod.SeccompProfile == nil || pod.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s pod: seccompProfile must be RuntimeDefault", name)
	}
	sc := c.SecurityContext
	switch {
	case sc == nil:
		t.Errorf("%s container: no securityContext", name)
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Errorf("%s container: allowPrivilegeEscalation must be false", name)
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Errorf("%s container: readOnlyRootFilesystem must be true", name)
	case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
		t.Errorf("%s container: capabilities must drop ALL and add none", name)
	case sc.Privileged != nil && *sc.Privileged:
		t.Errorf("%s container: must not be privileged", name)
	}
}

func TestResources(t *testing.T) {
	_, c := deployment(t)
	req, lim := c.Resources.Requests, c.Resources.Limits
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := req[r]; !ok || q.IsZero() {
			t.Errorf("no %s request", r)
		}
	}
	mem, ok := lim[corev1.ResourceMemory]
	if !ok {
		t.Fatal("no memory limit")
	}
	if reqMem := req[corev1.ResourceMemory]; mem.Cmp(reqMem) < 0 {
		t.Errorf("memory limit %s is below the request %s", mem.String(), reqMem.String())
	}
	// GOMEMLIMIT follows the limit.
	if e, ok := env(c, "GOMEMLIMIT"); ok {
		if e.ValueFrom == nil || e.ValueFrom.ResourceFieldRef == nil || e.ValueFrom.ResourceFieldRef.Resource != "limits.memory" {
			t.Error("GOMEMLIMIT must come from resourceFieldRef limits.memory, so it follows the limit")
		}
	}
}

// Kubernetes waits terminationGracePeriodSeconds after SIGTERM before killing the pod: that must
// cover SHUTDOWN_GRACE plus time for the final notes, and stay within what the bot promises.
func TestTerminationGraceCoversShutdownGrace(t *testing.T) {
	known := settings(t)
	d, c := deployment(t)
	graceText := known["SHUTDOWN_GRACE"].def
	if e, ok := env(c, "SHUTDOWN_GRACE"); ok {
		graceText = e.Value
	}
	grace, err := time.ParseDuration(graceText)
	if err != nil {
		t.Fatalf("SHUTDOWN_GRACE = %q: %v", graceText, err)
	}
	tg := d.Spec.Template.Spec.TerminationGracePeriodSeconds
	if tg == nil {
		t.Fatal("terminationGracePeriodSeconds is not set")
	}
	kill := time.Duration(*tg) * time.Second
	const margin = 5 * time.Second // final edits on detached contexts, the listener's shutdown, exit
	if kill < grace+margin {
		t.Errorf("terminationGracePeriodSeconds %v < SHUTDOWN_GRACE %v + %v: answers in progress would be killed before their final note", kill, grace, margin)
	}
	if kill > 30*time.Second {
		t.Errorf("terminationGracePeriodSeconds %v: keep it within Kubernetes' default 30s", kill)
	}
}

// The ConfigMap's override file is valid for the bot, and mounted where CHANNEL_CONFIG points.
func TestChannelConfigMap(t *testing.T) {
	var cm corev1.ConfigMap
	decode(t, "configmap.yaml", &cm)
	if cm.APIVersion != "v1" || cm.Kind != "ConfigMap" {
		t.Fatalf("configmap.yaml is %s %s, want v1 ConfigMap", cm.APIVersion, cm.Kind)
	}
	d, c := deployment(t)
	e, ok := env(c, "CHANNEL_CONFIG")
	if !ok {
		t.Skip("CHANNEL_CONFIG is not set: the ConfigMap is not used")
	}
	dir, file := filepath.Split(e.Value)
	dir = filepath.Clean(dir)
	content, ok := cm.Data[file]
	if !ok {
		t.Fatalf("CHANNEL_CONFIG names %s, which the ConfigMap lacks (keys: %v)", file, slices.Sorted(maps.Keys(cm.Data)))
	}
	if _, err := access.ParseOverrides([]byte(content), "configmap.yaml "+file); err != nil {
		t.Errorf("the ConfigMap's %s is not a valid override file: %v", file, err)
	}

	mi := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == dir })
	if mi < 0 {
		t.Fatalf("nothing is mounted at %s (CHANNEL_CONFIG's directory)", dir)
	}
	vol := c.VolumeMounts[mi].Name
	vi := slices.IndexFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == vol })
	if vi < 0 {
		t.Fatalf("volume %s is mounted but not declared", vol)
	}
	src := d.Spec.Template.Spec.Volumes[vi].ConfigMap
	if src == nil || src.Name != cm.Name {
		t.Errorf("volume %s is not the ConfigMap %s", vol, cm.Name)
	}
	if !c.VolumeMounts[mi].ReadOnly {
		t.Errorf("mount %s must be readOnly", dir)
	}
}

// kustomization is the part of kustomize's Kustomization the file uses (kustomize's own module
// is not a dependency); strict decoding still catches misspelt fields.
type kustomization struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Resources  []string         `json:"resources"`
	Images     []kustomizeImage `json:"images"`
}

type kustomizeImage struct {
	Name    string `json:"name"`
	NewName string `json:"newName"`
	NewTag  string `json:"newTag"`
	Digest  string `json:"digest"`
}

func TestKustomization(t *testing.T) {
	var k kustomization
	decode(t, "kustomization.yaml", &k)
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Errorf("kustomization.yaml is %s %s", k.APIVersion, k.Kind)
	}
	for _, r := range k.Resources {
		if _, err := os.Stat(r); err != nil {
			t.Errorf("resource %s: %v", r, err)
		}
	}
	for _, want := range []string{"deployment.yaml", "configmap.yaml", "pdb.yaml", "networkpolicy.yaml"} {
		if !slices.Contains(k.Resources, want) {
			t.Errorf("resources lack %s", want)
		}
	}
	// The Secret example points the bot at the kit's Redis, so the kit must apply it.
	if u, err := url.Parse(secretExample(t).StringData["REDIS_URL"]); err == nil && u.Hostname() == "llmbot-redis" &&
		!slices.Contains(k.Resources, "redis.yaml") {
		t.Error("resources lack redis.yaml, the Redis the Secret example's REDIS_URL names")
	}
	if slices.ContainsFunc(k.Resources, func(r string) bool { return strings.Contains(r, "secret") }) {
		t.Error("the Secret example must not be a resource: apply -k would overwrite the real tokens with placeholders")
	}
	_, c := deployment(t)
	if !slices.ContainsFunc(k.Images, func(i kustomizeImage) bool { return i.Name == c.Image && i.NewName != "" }) {
		t.Errorf("images: has no entry for the container image %q", c.Image)
	}
}

// Every YAML file here is checked by a test above.
func TestEveryManifestIsChecked(t *testing.T) {
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	checked := []string{"configmap.yaml", "deployment.yaml", "kustomization.yaml", "networkpolicy.yaml", "pdb.yaml",
		"redis.yaml", "secret.example.yaml"}
	for _, f := range files {
		if !slices.Contains(checked, f) {
			t.Errorf("%s is not checked by this test", f)
		}
	}
}

// matchLabels returns a selector's matchLabels, given how many matchExpressions it has: the tests
// read only matchLabels, so a selector with expressions (or with nothing, which selects every pod
// of the namespace) fails.
func matchLabels(t *testing.T, what string, labels map[string]string, expressions int) map[string]string {
	t.Helper()
	if len(labels) == 0 || expressions > 0 {
		t.Fatalf("%s: want a selector of matchLabels only", what)
	}
	return labels
}

// selects reports whether pods labelled labels are selected by sel's matchLabels.
func selects(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return len(sel) > 0
}

// redis decodes redis.yaml: the Redis Deployment, its Service and its NetworkPolicy.
func redis(t *testing.T) (*appsv1.Deployment, *corev1.Service, *networkingv1.NetworkPolicy) {
	t.Helper()
	var (
		d   appsv1.Deployment
		svc corev1.Service
		np  networkingv1.NetworkPolicy
	)
	decodeDocs(t, "redis.yaml", &d, &svc, &np)
	for _, o := range []struct{ got, want string }{
		{d.APIVersion + " " + d.Kind, "apps/v1 Deployment"},
		{svc.APIVersion + " " + svc.Kind, "v1 Service"},
		{np.APIVersion + " " + np.Kind, "networking.k8s.io/v1 NetworkPolicy"},
	} {
		if o.got != o.want {
			t.Fatalf("redis.yaml holds %s where %s was expected (documents: Deployment, Service, NetworkPolicy)", o.got, o.want)
		}
	}
	if n := len(d.Spec.Template.Spec.Containers); n != 1 {
		t.Fatalf("redis.yaml: %d containers, want 1", n)
	}
	return &d, &svc, &np
}

// The disruption budget covers the bot's pods, keeps one of them connected to Slack, and still
// lets a drain evict one with the Deployment's replicas (with 2: exactly one).
func TestPodDisruptionBudget(t *testing.T) {
	var pdb policyv1.PodDisruptionBudget
	decode(t, "pdb.yaml", &pdb)
	if pdb.APIVersion != "policy/v1" || pdb.Kind != "PodDisruptionBudget" {
		t.Fatalf("pdb.yaml is %s %s, want policy/v1 PodDisruptionBudget", pdb.APIVersion, pdb.Kind)
	}
	d, _ := deployment(t)
	if pdb.Spec.Selector == nil {
		t.Fatal("pdb.yaml has no selector")
	}
	sel := matchLabels(t, "pdb.yaml", pdb.Spec.Selector.MatchLabels, len(pdb.Spec.Selector.MatchExpressions))
	if !selects(sel, d.Spec.Template.Labels) {
		t.Errorf("the budget's selector %v does not select the bot's pods %v", sel, d.Spec.Template.Labels)
	}
	r, _, _ := redis(t)
	if selects(sel, r.Spec.Template.Labels) {
		t.Errorf("the budget's selector %v also selects the Redis pods %v", sel, r.Spec.Template.Labels)
	}

	replicas := int(*d.Spec.Replicas)
	var keep int // pods a voluntary disruption must leave running
	switch {
	case pdb.Spec.MinAvailable != nil && pdb.Spec.MaxUnavailable == nil:
		keep = scaled(t, pdb.Spec.MinAvailable.String(), replicas, true)
	case pdb.Spec.MaxUnavailable != nil && pdb.Spec.MinAvailable == nil:
		keep = replicas - scaled(t, pdb.Spec.MaxUnavailable.String(), replicas, true)
	default:
		t.Fatal("pdb.yaml: set exactly one of minAvailable and maxUnavailable")
	}
	if keep < 1 {
		t.Errorf("the budget lets a drain evict every replica (%d kept of %d): the bot would leave Slack", keep, replicas)
	}
	if replicas-keep < 1 {
		t.Errorf("the budget allows no disruption with %d replicas: it would block every node drain", replicas)
	}
	if p := pdb.Spec.UnhealthyPodEvictionPolicy; p == nil || *p != policyv1.AlwaysAllow {
		t.Error("unhealthyPodEvictionPolicy must be AlwaysAllow: during a Slack outage no replica is ready, and the budget would block every drain")
	}
}

// scaled is Kubernetes' reading of an int-or-percent field (its text: "1", "25%") against total
// pods.
func scaled(t *testing.T, text string, total int, roundUp bool) int {
	t.Helper()
	pct, isPct := strings.CutSuffix(text, "%")
	n, err := strconv.Atoi(pct)
	if err != nil {
		t.Fatalf("%q is neither a count nor a percentage", text)
	}
	if !isPct {
		return n
	}
	if roundUp {
		return (n*total + 99) / 100
	}
	return n * total / 100
}

// The kit's Redis: its Service reaches its pod, it runs locked down like the bot, it refuses
// writes before its memory limit kills it, and only one runs at a time.
func TestRedis(t *testing.T) {
	d, svc, _ := redis(t)
	spec := &d.Spec.Template.Spec
	c := &spec.Containers[0]
	podLabels := d.Spec.Template.Labels
	if sel := matchLabels(t, "redis.yaml Deployment", d.Spec.Selector.MatchLabels, len(d.Spec.Selector.MatchExpressions)); !selects(sel, podLabels) {
		t.Errorf("the Redis Deployment's selector %v does not match its pods %v", sel, podLabels)
	}
	if !selects(svc.Spec.Selector, podLabels) {
		t.Errorf("the Service's selector %v does not select the Redis pods %v", svc.Spec.Selector, podLabels)
	}
	bot, _ := deployment(t)
	if selects(bot.Spec.Selector.MatchLabels, podLabels) || selects(svc.Spec.Selector, bot.Spec.Template.Labels) {
		t.Error("the bot's and Redis's selectors overlap: each Deployment would count the other's pods as its own")
	}
	if svc.Spec.Type != "" && svc.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("Service type %s: only the bot connects to Redis, keep it ClusterIP", svc.Spec.Type)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 6379 {
		t.Fatalf("Service ports %v, want one: 6379", svc.Spec.Ports)
	}
	target := svc.Spec.Ports[0].TargetPort
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool {
		return p.ContainerPort == 6379 && (p.Name == target.String() || int(p.ContainerPort) == target.IntValue())
	}) {
		t.Errorf("the Service's targetPort %s is not the container's port 6379", target.String())
	}

	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
		t.Errorf("Redis replicas = %v, want 1: two would each hold part of the shared state", d.Spec.Replicas)
	}
	if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Error("Redis strategy must be Recreate: a rolling update runs two Redis behind the Service at once")
	}
	if a := spec.AutomountServiceAccountToken; a == nil || *a {
		t.Error("Redis: automountServiceAccountToken must be false")
	}
	lockedDown(t, "redis", spec, c)
	if c.ReadinessProbe == nil || (c.ReadinessProbe.Exec == nil && c.ReadinessProbe.TCPSocket == nil) {
		t.Error("Redis has no exec or tcpSocket readiness probe: the Service would send the bot to a Redis still starting")
	}
	if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/data" && !m.ReadOnly }) {
		t.Error("nothing writable is mounted at /data, the image's working directory")
	}

	// Persistence off: what Redis holds is of the moment (see redis.yaml).
	args := strings.Join(c.Args, " ")
	for _, want := range []string{`--save  `, `--appendonly no`} {
		if !strings.Contains(args+" ", want) {
			t.Errorf("Redis args %q lack %q: persistence should be off", c.Args, strings.TrimSpace(want))
		}
	}
	if !strings.Contains(args, "--maxmemory-policy noeviction") {
		t.Error("Redis must not evict keys (--maxmemory-policy noeviction): an evicted liveness key makes a live replica look dead")
	}
	limit, ok := c.Resources.Limits[corev1.ResourceMemory]
	if !ok {
		t.Fatal("Redis has no memory limit")
	}
	if q, ok := c.Resources.Requests[corev1.ResourceMemory]; !ok || q.IsZero() {
		t.Error("Redis has no memory request")
	}
	m := regexp.MustCompile(`--maxmemory (\d+)mb\b`).FindStringSubmatch(args)
	if m == nil {
		t.Fatal("Redis args lack --maxmemory <n>mb: a full Redis would be killed at its limit and lose everything")
	}
	maxmemory, _ := strconv.ParseInt(m[1], 10, 64)
	if maxmemory<<20 > limit.Value()*3/4 {
		t.Errorf("--maxmemory %dmb leaves too little of the %s limit for Redis's own overhead: keep it within 3/4", maxmemory, limit.String())
	}
}

// REDIS_URL reaches the kit's Redis: the Secret example names the Service on its port, with the
// password Redis requires (the example's REDIS_PASSWORD placeholder), and the bot reads it from
// the Secret, not optionally.
func TestRedisURLReachesRedis(t *testing.T) {
	_, c := deployment(t)
	e, ok := env(c, "REDIS_URL")
	if !ok || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
		t.Fatal("REDIS_URL must come from the Secret: it holds Redis's password")
	}
	if o := e.ValueFrom.SecretKeyRef.Optional; o != nil && *o {
		t.Error("REDIS_URL must not be optional: replicas without it answer redeliveries twice and overrun Slack's limits")
	}
	secret := secretExample(t)
	raw, ok := secret.StringData[e.ValueFrom.SecretKeyRef.Key]
	if !ok {
		t.Fatalf("secret.example.yaml has no %s", e.ValueFrom.SecretKeyRef.Key)
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("secret.example.yaml REDIS_URL %q: %v", raw, err)
	}
	_, svc, _ := redis(t)
	if u.Scheme != "redis" || u.Hostname() != svc.Name || u.Port() != strconv.Itoa(int(svc.Spec.Ports[0].Port)) {
		t.Errorf("secret.example.yaml REDIS_URL = %q, want redis://:PASSWORD@%s:%d/0, the kit's Redis", raw, svc.Name, svc.Spec.Ports[0].Port)
	}
	password, hasPassword := u.User.Password()
	if want := secret.StringData[redisPasswordKey(t)]; !hasPassword || password != want {
		t.Errorf("secret.example.yaml REDIS_URL's password is %q, want the Redis password's placeholder %q", password, want)
	}
}

// redisPasswordKey is the Secret key the kit's Redis takes its password from: the one its
// --requirepass argument names through an env var read from the Secret "llmbot".
func redisPasswordKey(t *testing.T) string {
	t.Helper()
	d, _, _ := redis(t)
	c := &d.Spec.Template.Spec.Containers[0]
	i := slices.Index(c.Args, "--requirepass")
	if i < 0 || i+1 >= len(c.Args) {
		t.Fatalf("Redis args %q lack --requirepass: any pod that reaches it could read and write the bot's state", c.Args)
	}
	m := regexp.MustCompile(`^\$\(([A-Z_]+)\)$`).FindStringSubmatch(c.Args[i+1])
	if m == nil {
		t.Fatalf("--requirepass %q: want $(VAR), an env var from the Secret, never a literal", c.Args[i+1])
	}
	e, ok := env(c, m[1])
	if !ok || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
		t.Fatalf("Redis env %s must come from the Secret", m[1])
	}
	ref := e.ValueFrom.SecretKeyRef
	if ref.Name != secretExample(t).Name || (ref.Optional != nil && *ref.Optional) {
		t.Fatalf("Redis env %s reads Secret %q (optional %v), want %q, not optional", m[1], ref.Name, ref.Optional, secretExample(t).Name)
	}
	return ref.Key
}

// The kit's Redis requires a password from the Secret, which the example has as a placeholder,
// and its readiness probe authenticates with it (a PING without it is refused, so the probe
// would keep Redis out of its Service for good).
func TestRedisRequiresPassword(t *testing.T) {
	key := redisPasswordKey(t)
	v, ok := secretExample(t).StringData[key]
	if !ok || !strings.Contains(v, "REPLACE-ME") {
		t.Errorf("secret.example.yaml %s = %q, want a REPLACE-ME placeholder", key, v)
	}
	d, _, _ := redis(t)
	c := &d.Spec.Template.Spec.Containers[0]
	e, ok := env(c, "REDISCLI_AUTH")
	if !ok || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Key != key {
		t.Errorf("Redis env REDISCLI_AUTH must come from the Secret's %s: the probe's redis-cli authenticates with it", key)
	}
	for _, a := range c.Args {
		if looksSecret(a) {
			t.Errorf("Redis arg %q looks like a credential", a)
		}
	}
}

// Only the bot's pods may reach Redis, on the Service's port.
func TestRedisNetworkPolicy(t *testing.T) {
	d, svc, np := redis(t)
	ps := np.Spec.PodSelector
	if sel := matchLabels(t, "the NetworkPolicy's podSelector", ps.MatchLabels, len(ps.MatchExpressions)); !selects(sel, d.Spec.Template.Labels) {
		t.Errorf("the NetworkPolicy selects %v, not the Redis pods %v", sel, d.Spec.Template.Labels)
	}
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		t.Errorf("policyTypes %v, want [Ingress]: the policy restricts who connects to Redis", np.Spec.PolicyTypes)
	}
	bot, _ := deployment(t)
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) != 1 || len(np.Spec.Ingress[0].Ports) != 1 {
		t.Fatal("want one ingress rule: from the bot's pods, to Redis's port")
	}
	rule := np.Spec.Ingress[0]
	from := rule.From[0]
	if from.NamespaceSelector != nil || from.IPBlock != nil || from.PodSelector == nil {
		t.Fatal("the ingress rule must admit pods of this namespace by podSelector only")
	}
	if sel := matchLabels(t, "the ingress rule's podSelector", from.PodSelector.MatchLabels, len(from.PodSelector.MatchExpressions)); !selects(sel, bot.Spec.Template.Labels) {
		t.Errorf("the ingress rule admits %v, not the bot's pods %v: the bot could not reach Redis", sel, bot.Spec.Template.Labels)
	}
	if p := rule.Ports[0].Port; p == nil || p.IntValue() != int(svc.Spec.Ports[0].Port) {
		t.Errorf("the ingress rule's port is not %d", svc.Spec.Ports[0].Port)
	}
}

// STATE_DIR is on a volume the bot can write (the root filesystem is read-only) and that outlives
// a container restart: an emptyDir, with a size limit.
func TestStateDirIsWritable(t *testing.T) {
	d, c := deployment(t)
	e, ok := env(c, "STATE_DIR")
	if !ok || !filepath.IsAbs(e.Value) {
		t.Fatal("STATE_DIR must be an absolute path: its default, the user's cache directory, is on the read-only root filesystem")
	}
	dir := filepath.Clean(e.Value)
	mi := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		rel, err := filepath.Rel(m.MountPath, dir)
		return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
	})
	if mi < 0 {
		t.Fatalf("nothing is mounted at STATE_DIR %s: the read-only root filesystem would refuse the journal", dir)
	}
	m := c.VolumeMounts[mi]
	if m.ReadOnly {
		t.Errorf("the mount at %s is readOnly: the bot writes its journal there", m.MountPath)
	}
	vi := slices.IndexFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
	if vi < 0 {
		t.Fatalf("volume %s is mounted but not declared", m.Name)
	}
	ed := d.Spec.Template.Spec.Volumes[vi].EmptyDir
	if ed == nil {
		t.Fatalf("volume %s is not an emptyDir", m.Name)
	}
	if ed.Medium == corev1.StorageMediumMemory {
		t.Error("the STATE_DIR emptyDir is in memory: it would count against the container's memory limit")
	}
	if ed.SizeLimit == nil || ed.SizeLimit.IsZero() {
		t.Error("the STATE_DIR emptyDir has no sizeLimit")
	}
}
