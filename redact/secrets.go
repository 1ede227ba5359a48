package redact

import "strings"

// tokenShape is a key or token that starts with a known prefix: at least min characters of its
// alphabet follow the prefix (exactly min when exact).
type tokenShape struct {
	prefix string
	min    int
	exact  bool
	chars  func(byte) bool
}

func keyChar(c byte) bool      { return isAlnum(c) || c == '_' || c == '-' }
func upperOrDigit(c byte) bool { return isUpper(c) || isDigit(c) }

// tokenShapes are the keys and tokens of common services, by their published prefixes.
var tokenShapes = []tokenShape{
	{prefix: "sk-", min: 20, chars: keyChar},                    // OpenAI (sk-proj-…), Anthropic (sk-ant-…), DeepSeek
	{prefix: "sk_live_", min: 16, chars: keyChar},               // Stripe
	{prefix: "rk_live_", min: 16, chars: keyChar},               // Stripe restricted
	{prefix: "xoxb-", min: 10, chars: keyChar},                  // Slack bot token
	{prefix: "xoxp-", min: 10, chars: keyChar},                  // Slack user token
	{prefix: "xoxa-", min: 10, chars: keyChar},                  // Slack
	{prefix: "xoxe-", min: 10, chars: keyChar},                  // Slack refresh
	{prefix: "xoxs-", min: 10, chars: keyChar},                  // Slack
	{prefix: "xapp-", min: 10, chars: keyChar},                  // Slack app-level token
	{prefix: "ghp_", min: 30, chars: isAlnum},                   // GitHub
	{prefix: "gho_", min: 30, chars: isAlnum},                   // GitHub OAuth
	{prefix: "ghu_", min: 30, chars: isAlnum},                   // GitHub user-to-server
	{prefix: "ghs_", min: 30, chars: isAlnum},                   // GitHub server-to-server
	{prefix: "ghr_", min: 30, chars: isAlnum},                   // GitHub refresh
	{prefix: "github_pat_", min: 30, chars: keyChar},            // GitHub fine-grained
	{prefix: "glpat-", min: 20, chars: keyChar},                 // GitLab
	{prefix: "hf_", min: 30, chars: isAlnum},                    // Hugging Face
	{prefix: "npm_", min: 36, chars: isAlnum},                   // npm
	{prefix: "AKIA", min: 16, exact: true, chars: upperOrDigit}, // AWS access key id
	{prefix: "ASIA", min: 16, exact: true, chars: upperOrDigit}, // AWS temporary key id
	{prefix: "AIza", min: 35, exact: true, chars: keyChar},      // Google API key
}

// secretFirsts are the first bytes of every shape secret knows.
const secretFirsts = "sxrghnAeBb"

// secret checks the word at i for a key or token: a known prefix, a JSON web token, or what
// follows "Bearer ". It returns the secret's bounds.
func secret(t string, i int) (int, int, bool) {
	if strings.IndexByte(secretFirsts, t[i]) < 0 {
		return 0, 0, false
	}
	rest := t[i:]
	for _, s := range tokenShapes {
		if !strings.HasPrefix(rest, s.prefix) {
			continue
		}
		j := i + len(s.prefix)
		k := j
		for k < len(t) && s.chars(t[k]) {
			k++
		}
		if n := k - j; n >= s.min && (!s.exact || n == s.min) && endsAt(t, k) {
			return i, k, true
		}
	}
	if strings.HasPrefix(rest, "eyJ") {
		if end, ok := jwt(t, i); ok {
			return i, end, true
		}
	}
	if strings.HasPrefix(rest, "Bearer ") || strings.HasPrefix(rest, "bearer ") {
		j := i + len("Bearer ")
		k := j
		for k < len(t) && (keyChar(t[k]) || t[k] == '.' || t[k] == '~' || t[k] == '+' || t[k] == '/' || t[k] == '=') {
			k++
		}
		if k-j >= 20 && endsAt(t, k) {
			return j, k, true
		}
	}
	return 0, 0, false
}

// jwt reads a JSON web token at i: three base64url segments a dot apart, the first two at
// least 10 characters.
func jwt(t string, i int) (int, bool) {
	k := i
	for seg := range 3 {
		j := k
		for k < len(t) && keyChar(t[k]) {
			k++
		}
		if seg < 2 && k-j < 10 {
			return 0, false
		}
		if seg < 2 {
			if k >= len(t) || t[k] != '.' {
				return 0, false
			}
			k++
		}
	}
	return k, endsAt(t, k)
}
