// Package openaischema checks JSON documents against OpenAI's published OpenAPI document, for tests:
// what the bot sends a model service (and what the fakes answer) must be valid for OpenAI itself,
// whatever the compatible servers tolerate.
//
// The document is not vendored: CI lays out shared/schemas/openai-openapi.json beside the checkout
// (see shared/schemas/README.md). Without it, Load returns a nil Doc, whose checks pass, unless
// LLMBOT_REQUIRE_SCHEMAS is set (CI), which makes the absence an error.
package openaischema

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/dlclark/regexp2"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Require is the environment variable that makes a missing document an error.
const Require = "LLMBOT_REQUIRE_SCHEMAS"

// Doc is OpenAI's OpenAPI document, compiled on demand schema by schema. A nil Doc (the document
// is missing and not required) validates everything.
type Doc struct {
	c       *jsonschema.Compiler
	mu      sync.Mutex
	schemas map[string]*jsonschema.Schema
}

// Path is where the document is expected: shared/schemas beside the module's root (found from the
// working directory, which is a package's directory under go test).
func Path() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "..", "shared", "schemas", "openai-openapi.json"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("openaischema: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Load reads and prepares the document at Path. It returns nil, nil when the document is missing
// and Require is unset.
func Load() (*Doc, error) {
	path, err := Path()
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) && os.Getenv(Require) == "" {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("openaischema: %w", err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		return nil, fmt.Errorf("openaischema: %s: %w", path, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseRegexpEngine(ecmaRegexp)
	if err := c.AddResource("https://openai.test/openapi.json", rewriteNullable(doc)); err != nil {
		return nil, fmt.Errorf("openaischema: %w", err)
	}
	return &Doc{c: c, schemas: map[string]*jsonschema.Schema{}}, nil
}

// Schema returns components/schemas/<name>, compiled once; nil for a nil Doc.
func (d *Doc) Schema(name string) (*jsonschema.Schema, error) {
	if d == nil {
		return nil, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if s, ok := d.schemas[name]; ok {
		return s, nil
	}
	s, err := d.c.Compile("https://openai.test/openapi.json#/components/schemas/" + name)
	if err != nil {
		return nil, fmt.Errorf("openaischema: compile %s: %w", name, err)
	}
	d.schemas[name] = s
	return s, nil
}

// Validate checks one JSON document against the schema name (nil: valid, or no document).
func (d *Doc) Validate(name string, data []byte) error {
	s, err := d.Schema(name)
	if err != nil || s == nil {
		return err
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return err
	}
	return s.Validate(v)
}

// rewriteNullable turns OAS 3.0's {type: T, nullable: true} into JSON Schema's {type: [T, "null"]}
// (adding null to an enum), and a nullable schema without a type into anyOf [schema, {type: null}].
func rewriteNullable(v any) any {
	switch v := v.(type) {
	case []any:
		for i := range v {
			v[i] = rewriteNullable(v[i])
		}
		return v
	case map[string]any:
		for k, x := range v {
			v[k] = rewriteNullable(x)
		}
		return nullable(v)
	}
	return v
}

func nullable(v map[string]any) any {
	if n, _ := v["nullable"].(bool); !n {
		delete(v, "nullable")
		return v
	}
	delete(v, "nullable")
	if enum, ok := v["enum"].([]any); ok {
		v["enum"] = append(enum, nil)
	}
	switch t := v["type"].(type) {
	case string:
		v["type"] = []any{t, "null"}
		return v
	case []any:
		v["type"] = append(t, "null")
		return v
	}
	return map[string]any{"anyOf": []any{v, map[string]any{"type": "null"}}}
}

// ecma matches the document's patterns as JavaScript does (they are ECMAScript regular expressions).
type ecma regexp2.Regexp

func (re *ecma) MatchString(s string) bool {
	ok, err := (*regexp2.Regexp)(re).MatchString(s)
	return err == nil && ok
}

func (re *ecma) String() string { return (*regexp2.Regexp)(re).String() }

func ecmaRegexp(s string) (jsonschema.Regexp, error) {
	re, err := regexp2.Compile(s, regexp2.ECMAScript)
	if err != nil {
		return nil, err
	}
	return (*ecma)(re), nil
}
