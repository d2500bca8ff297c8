package dhtcrawler

// Every status of dhtcrawler.h's dhtc_status enum has its Go error: the test reads the
// header the package is built against and fails on a status the package does not know.

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const headerPath = "../../capi/include/dhtcrawler.h"

// headerStatuses parses `typedef enum dhtc_status { NAME = value, ... } dhtc_status;`.
func headerStatuses(t *testing.T) map[string]int {
	t.Helper()
	src, err := os.ReadFile(headerPath)
	if err != nil {
		t.Fatal(err)
	}
	body := regexp.MustCompile(`(?s)typedef\s+enum\s+dhtc_status\s*\{(.*?)\}\s*dhtc_status\s*;`).FindSubmatch(src)
	if body == nil {
		t.Fatalf("%s: no `typedef enum dhtc_status {...} dhtc_status;`", headerPath)
	}
	noComments := regexp.MustCompile(`(?s)/\*.*?\*/|//[^\n]*`).ReplaceAll(body[1], nil)
	out := map[string]int{}
	entry := regexp.MustCompile(`^(DHTC_[A-Z0-9_]+)\s*=\s*(-?\d+)$`)
	for _, item := range strings.Split(string(noComments), ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		m := entry.FindStringSubmatch(item)
		if m == nil {
			t.Fatalf("%s: dhtc_status entry %q is not NAME = value", headerPath, item)
		}
		v, _ := strconv.Atoi(m[2])
		out[m[1]] = v
	}
	if len(out) < 11 {
		t.Fatalf("%s: only %d statuses parsed: %v", headerPath, len(out), out)
	}
	return out
}

// exportedSentinels lists the Err* variables errors.go declares with sentinel(...).
func exportedSentinels(t *testing.T) map[string]bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		spec, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range spec.Names {
			if i < len(spec.Values) {
				if call, ok := spec.Values[i].(*ast.CallExpr); ok {
					if fn, ok := call.Fun.(*ast.Ident); ok && fn.Name == "sentinel" {
						out[name.Name] = true
					}
				}
			}
		}
		return true
	})
	return out
}

// goName is the sentinel's name for a status: DHTC_ERR_INVALID_OPTION -> ErrInvalidOption.
func goName(status string) string {
	words := strings.Split(strings.ToLower(strings.TrimPrefix(status, "DHTC_ERR_")), "_")
	name := "Err"
	for _, w := range words {
		name += strings.ToUpper(w[:1]) + w[1:]
	}
	return name
}

func TestEveryHeaderStatusHasAGoError(t *testing.T) {
	declared := exportedSentinels(t)
	for name, value := range headerStatuses(t) {
		if got := statusName(value); got != name {
			t.Errorf("%s = %d: the library names it %q", name, value, got)
		}
		if name == "DHTC_OK" {
			if value != statusOK || StatusError(value) != nil {
				t.Errorf("DHTC_OK = %d maps to %v", value, StatusError(value))
			}
			continue
		}
		e := StatusError(value)
		if e == nil {
			t.Errorf("%s = %d has no Go error (add it to cgo.go's statuses and errors.go)", name, value)
			continue
		}
		if e.Name != name || e.Status != value {
			t.Errorf("%s = %d: Go error %+v", name, value, e)
		}
		if !declaredFold(declared, goName(name)) {
			t.Errorf("%s: no exported %s = sentinel(...) in errors.go", name, goName(name))
		}
	}
	if n := len(sentinels) + 1; n != len(headerStatuses(t)) {
		t.Errorf("%d Go statuses, %d in the header", n, len(headerStatuses(t)))
	}
}

func TestHeaderAndLibraryVersionsAgree(t *testing.T) {
	if HeaderVersion() != Version() {
		t.Errorf("built against dhtcrawler.h %s, running library %s", HeaderVersion(), Version())
	}
}

// declaredFold finds a sentinel whose name differs only in the case of an initialism
// (ErrInvalidJSON for DHTC_ERR_INVALID_JSON).
func declaredFold(declared map[string]bool, name string) bool {
	for d := range declared {
		if strings.EqualFold(d, name) {
			return true
		}
	}
	return false
}
