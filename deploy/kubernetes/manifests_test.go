// Package kubernetes_test checks the Kubernetes manifests without a cluster: each file decodes
// strictly into the Kubernetes API types (an unknown or misspelt field fails), and what they
// say agrees with the bot: setting names, the health listener's port and paths, the shutdown
// grace, the Secret's keys, the ConfigMap's override file, and the security settings.
package kubernetes_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
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
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
		t.Errorf("replicas = %v, want 1 by default", d.Spec.Replicas)
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
	pod := d.Spec.Template.Spec.SecurityContext
	if pod == nil || pod.RunAsNonRoot == nil || !*pod.RunAsNonRoot {
		t.Error("pod: runAsNonRoot must be true")
	}
	if pod == nil || pod.RunAsUser == nil || *pod.RunAsUser != 65532 {
		t.Error("pod: runAsUser must be 65532, the image's nonroot user (Dockerfile USER)")
	}
	if pod == nil || pod.SeccompProfile == nil || pod.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("pod: seccompProfile must be RuntimeDefault")
	}
	sc := c.SecurityContext
	switch {
	case sc == nil:
		t.Fatal("container: no securityContext")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("container: allowPrivilegeEscalation must be false")
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("container: readOnlyRootFilesystem must be true")
	case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
		t.Error("container: capabilities must drop ALL and add none")
	case sc.Privileged != nil && *sc.Privileged:
		t.Error("container: must not be privileged")
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
	for _, want := range []string{"deployment.yaml", "configmap.yaml"} {
		if !slices.Contains(k.Resources, want) {
			t.Errorf("resources lack %s", want)
		}
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
	checked := []string{"configmap.yaml", "deployment.yaml", "kustomization.yaml", "secret.example.yaml"}
	for _, f := range files {
		if !slices.Contains(checked, f) {
			t.Errorf("%s is not checked by this test", f)
		}
	}
}
