package dhtcrawler_test

// docs/torrent.schema.json, checked with a maintained JSON-Schema validator
// (github.com/santhosh-tekuri/jsonschema/v6, draft 2020-12, formats asserted): the
// documented example validates, and each rule of the schema rejects what it should.

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

const torrentSchemaPath = "../../docs/torrent.schema.json"

// torrentSchema compiles docs/torrent.schema.json; "format" is asserted (date-time), as
// the schema means it.
func torrentSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	raw, err := os.ReadFile(torrentSchemaPath)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("%s: %v", torrentSchemaPath, err)
	}
	compiler := jsonschema.NewCompiler()
	compiler.AssertFormat()
	const url = "file:///dhtcrawler/torrent.schema.json"
	if err := compiler.AddResource(url, doc); err != nil {
		t.Fatal(err)
	}
	schema, err := compiler.Compile(url)
	if err != nil {
		t.Fatalf("%s: %v", torrentSchemaPath, err)
	}
	return schema
}

// validateJSON decodes doc the way the validator wants it (numbers kept exact) and
// validates it.
func validateJSON(schema *jsonschema.Schema, doc []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return err
	}
	return schema.Validate(v)
}

const exampleTorrent = `{"schema":1,"info_hash":"5e46db9a20e2aaef9deee4b7bd8fd5a5b5250116",
 "info_hash_v1":"5e46db9a20e2aaef9deee4b7bd8fd5a5b5250116",
 "info_hash_v2":"efa562fb37d767d81ecaa06641a7d311cd946ebb8cf809fed9d2a68fd78f6c66",
 "version":"hybrid","name":"hybrid","total_size":54005,"num_files":1,"piece_length":16384,
 "private":false,"files":[{"path":"one.bin","size":54005}],
 "peer":"[2001:db8::1]:51413","discovered_at":"2026-12-02T18:00:00Z","later_field":[1]}`

func TestTheDocumentedExampleValidates(t *testing.T) {
	if err := validateJSON(torrentSchema(t), []byte(exampleTorrent)); err != nil {
		t.Fatal(err)
	}
}

// Each mutation breaks exactly one rule of the schema; the error must name its place (a
// JSON pointer into the instance).
func TestEveryRuleRejects(t *testing.T) {
	s := torrentSchema(t)
	cases := []struct{ from, to, where string }{
		{`"schema":1`, `"schema":0`, "'/schema'"},
		{`"schema":1`, `"schema":1.5`, "'/schema'"},
		{`"info_hash":"5e46`, `"info_hash":"5E46`, "'/info_hash'"},
		{`"info_hash_v2":"efa5`, `"info_hash_v2":"ef`, "'/info_hash_v2'"},
		{`"info_hash_v1":"5e46db9a20e2aaef9deee4b7bd8fd5a5b5250116"`, `"info_hash_v1":7`, "'/info_hash_v1'"},
		{`"version":"hybrid"`, `"version":"v3"`, "'/version'"},
		{`"name":"hybrid"`, `"name":""`, "'/name'"},
		{`"total_size":54005`, `"total_size":9007199254740992`, "'/total_size'"},
		{`"total_size":54005`, `"total_size":-1`, "'/total_size'"},
		{`"num_files":1`, `"num_files":0`, "'/num_files'"},
		{`"piece_length":16384`, `"piece_length":2147483648`, "'/piece_length'"},
		{`"private":false`, `"private":0`, "'/private'"},
		{`{"path":"one.bin","size":54005}`, `{"path":"one.bin"}`, "'/files/0'"},
		{`"path":"one.bin"`, `"path":""`, "'/files/0/path'"},
		{`"peer":"[2001:db8::1]:51413"`, `"peer":"host:1"`, "'/peer'"},
		{`"discovered_at":"2026-12-02T18:00:00Z"`, `"discovered_at":"2026-12-02T18:00:00.5Z"`, "'/discovered_at'"},
		{`"discovered_at":"2026-12-02T18:00:00Z"`, `"discovered_at":"2026-13-02T18:00:00Z"`, "'/discovered_at'"},
		{`"schema":1,`, ``, "'schema'"},
	}
	for _, c := range cases {
		doc := strings.Replace(exampleTorrent, c.from, c.to, 1)
		if doc == exampleTorrent {
			t.Fatalf("mutation %q did not apply", c.from)
		}
		err := validateJSON(s, []byte(doc))
		if err == nil || !strings.Contains(err.Error(), c.where) {
			t.Errorf("%s -> %s: got %v, want an error at %s", c.from, c.to, err, c.where)
		}
	}
}
