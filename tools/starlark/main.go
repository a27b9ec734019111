// Command starlark runs a Starlark file without Bazel: the syntax checks of MODULE.bazel,
// WORKSPACE and .bzl files, and tests of pure Starlark helpers, in milliseconds.
//
//	starlark [-root DIR] [-repo NAME=DIR]... [-calls FILE] [-doc FILE] [-buck2 -predeclare FILE] FILE
//
// It executes FILE with go.starlark.net in Bazel 4.2.3's dialect (no top-level if/for, no
// recursion, no set, no lambda, no nested def), prints what `print` prints to stdout,
// and exits 1 on any error with a backtrace on stderr (2 on bad usage).
//
// load() resolves Bazel labels and plain paths:
//   - "//pkg:file.bzl" and "@NAME//pkg:file.bzl", where NAME is "" or the main
//     repository's name (read from MODULE.bazel or WORKSPACE), are files under -root;
//   - "@NAME//..." with -repo NAME=DIR are files under DIR;
//   - ":file.bzl" is relative to the loading file's package (nearest directory up with a
//     BUILD file, else the file's directory); "file.star" relative to the loading file;
//   - any other "@repo//..." is not read: every name loaded from it is a stub (below).
//
// Predeclared, besides the Starlark universe:
//   - real: struct, fail (Bazel's message and msg=/attr=), json, print, provider (returns
//     a constructor of structs, so helpers can build and read provider instances);
//   - stubs for Bazel's other globals (rule, attr, native, select, Label, the bzlmod and
//     WORKSPACE functions, ...): calling one returns another stub, any attribute of one
//     is a stub, so code that only declares things runs. As in Bazel, a stub returned by
//     a call and bound to a global (`foo = rule(...)`) takes that global's name.
//     use_extension(file, "ext") returns a stub named "ext", so `ext.tag(...)` calls
//     are recorded as "ext.tag".
//
// With -buck2, FILE runs in Buck2's dialect instead: lambda and nested def are allowed
// (Buck2's Starlark has them), none of Bazel's globals is predeclared (so a shared .bzl
// file that names one fails: it would fail on Buck2 too), and provider() is Buck2's
// (provider(fields = [...] or {...}, doc = ...); an instance has every field, None where
// not given, and rejects others). -predeclare FILE (with -buck2) first runs FILE, a
// stand-in for the rest of Buck2's API (tests/buck2/buck2_api.star), and predeclares its
// public globals in every other file; FILE alone also sees provider_of(instance), which
// returns the provider that made an instance.
//
// With -calls FILE, every call of a stub is written to FILE as a JSON list of
// {"fn": name, "args": [...], "kwargs": {...}, "at": "file:line:col"}; stubs and other
// non-data values appear as strings.
//
// With -doc FILE, what FILE documents (its docstring, its public rules, macros, providers,
// functions and values, and the targets of a BUILD file) is written to FILE as JSON
// (doc.go says how).
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"go.starlark.net/resolve"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkjson"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"
)

// stubGlobals are Bazel's globals that this interpreter only imitates.
var stubGlobals = []string{
	// .bzl files
	"DefaultInfo", "OutputGroupInfo", "RunEnvironmentInfo", "InstrumentedFilesInfo",
	"CcInfo", "cc_common", "coverage_common", "Label", "analysis_test_transition",
	"aspect", "attr", "config", "config_common", "configuration_field", "depset",
	"exec_group", "module_extension", "native", "platform_common", "repository_rule",
	"rule", "select", "tag_class", "testing", "transition", "visibility",
	// MODULE.bazel
	"module", "bazel_dep", "use_extension", "use_repo", "use_repo_rule",
	"register_toolchains", "register_execution_platforms", "include", "inject_repo",
	"override_repo", "local_path_override", "archive_override", "git_override",
	"single_version_override", "multiple_version_override",
	// WORKSPACE and BUILD files
	"workspace", "local_repository", "new_local_repository", "bind", "package",
	"exports_files", "filegroup", "alias", "genrule", "glob", "toolchain",
	"toolchain_type", "config_setting", "constraint_setting", "constraint_value",
	"platform", "test_suite",
}

func main() {
	os.Exit(run(os.Args[1:]))
}

type repoFlags map[string]string

func (r repoFlags) String() string { return fmt.Sprint(map[string]string(r)) }

func (r repoFlags) Set(v string) error {
	i := strings.Index(v, "=")
	if i <= 0 {
		return fmt.Errorf("want NAME=DIR, got %q", v)
	}
	dir, err := filepath.Abs(v[i+1:])
	if err != nil {
		return err
	}
	r[v[:i]] = dir
	return nil
}

func run(argv []string) int {
	fs := flag.NewFlagSet("starlark", flag.ContinueOnError)
	root := fs.String("root", "", "`DIR` that \"//\" labels refer to (default: the nearest "+
		"directory up from FILE, else from the working directory, with MODULE.bazel or WORKSPACE)")
	calls := fs.String("calls", "", "write the calls of stubs as JSON to this `file`")
	docOut := fs.String("doc", "", "write what FILE documents as JSON to this `file`")
	buck2 := fs.Bool("buck2", false, "Buck2's dialect and globals (see -predeclare)")
	predeclare := fs.String("predeclare", "", "with -buck2: run this `file` first and "+
		"predeclare its public globals in every other file")
	repos := repoFlags{}
	fs.Var(repos, "repo", "serve `NAME=DIR` for load(\"@NAME//...\") (repeatable)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: starlark [-root DIR] [-repo NAME=DIR]... [-calls FILE] [-doc FILE] [-buck2 [-predeclare FILE]] FILE")
		fs.PrintDefaults()
	}
	if err := fs.Parse(argv); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	file, err := filepath.Abs(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if *root == "" {
		*root = findRoot(filepath.Dir(file))
	}
	absRoot, err := filepath.Abs(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}

	// Bazel's dialect of Starlark (lambda and nested def: see checkBazel4).
	resolve.AllowSet = false
	resolve.AllowGlobalReassign = false
	resolve.AllowRecursion = false

	if *predeclare != "" && !*buck2 {
		fmt.Fprintln(os.Stderr, "-predeclare needs -buck2")
		return 2
	}
	in := newInterpreter(absRoot, repos)
	if *buck2 {
		in.useBuck2()
		if *predeclare != "" {
			path, err := filepath.Abs(*predeclare)
			if err == nil {
				err = in.predeclareFrom(path)
			}
			if err != nil {
				return report(err)
			}
		}
	}
	if _, err := in.load(file); err != nil {
		return report(err)
	}
	if *calls != "" {
		data, err := jsonIndent(in.calls)
		if err == nil {
			err = os.WriteFile(*calls, data, 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	if *docOut != "" {
		if err := in.writeDoc(file, *docOut); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

// jsonIndent encodes v as indented JSON, leaving <, > and & as they are.
func jsonIndent(v interface{}) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	err := enc.Encode(v)
	return buf.Bytes(), err
}

// report prints an error (with its Starlark backtrace, if any) and returns exit code 1.
func report(err error) int {
	var evalErr *starlark.EvalError
	if errors.As(err, &evalErr) {
		fmt.Fprintln(os.Stderr, evalErr.Backtrace())
	} else {
		fmt.Fprintln(os.Stderr, err)
	}
	return 1
}

// findRoot returns the nearest directory up from dir, else from the working directory,
// that holds a MODULE.bazel or WORKSPACE file; the working directory if none does.
func findRoot(dir string) string {
	cwd, _ := os.Getwd()
	for _, start := range []string{dir, cwd} {
		for d := start; ; d = filepath.Dir(d) {
			for _, marker := range []string{"MODULE.bazel", "WORKSPACE", "WORKSPACE.bazel"} {
				if _, err := os.Stat(filepath.Join(d, marker)); err == nil {
					return d
				}
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return cwd
}

// mainRepoNames returns the names by which the main repository may refer to itself.
func mainRepoNames(root string) map[string]bool {
	names := map[string]bool{"": true}
	patterns := map[string]*regexp.Regexp{
		"MODULE.bazel":    regexp.MustCompile(`(?s)\bmodule\s*\(.*?\bname\s*=\s*"([^"]+)"`),
		"WORKSPACE":       regexp.MustCompile(`(?s)\bworkspace\s*\(.*?\bname\s*=\s*"([^"]+)"`),
		"WORKSPACE.bazel": regexp.MustCompile(`(?s)\bworkspace\s*\(.*?\bname\s*=\s*"([^"]+)"`),
	}
	for file, re := range patterns {
		if data, err := os.ReadFile(filepath.Join(root, file)); err == nil {
			if m := re.FindSubmatch(data); m != nil {
				names[string(m[1])] = true
			}
		}
	}
	return names
}

type call struct {
	Fn     string                 `json:"fn"`
	Args   []interface{}          `json:"args"`
	Kwargs map[string]interface{} `json:"kwargs"`
	At     string                 `json:"at"`
}

type cacheEntry struct {
	globals starlark.StringDict
	err     error
}

type interpreter struct {
	root        string
	repos       map[string]string
	mainNames   map[string]bool
	predeclared starlark.StringDict
	cache       map[string]*cacheEntry // by absolute path; nil entry: being loaded
	calls       []call
	instances   []instance         // every call of a stub, with its Starlark arguments
	asts        map[string]*parsed // by absolute path: every file executed
	buck2       bool               // Buck2's dialect: lambda and nested def allowed
}

// useBuck2 switches to Buck2's dialect and globals: Starlark's, json, struct, fail and
// Buck2's provider; nothing of Bazel's.
func (in *interpreter) useBuck2() {
	in.buck2 = true
	in.predeclared = starlark.StringDict{
		"struct":   starlark.NewBuiltin("struct", starlarkstruct.Make),
		"fail":     starlark.NewBuiltin("fail", bazelFail),
		"json":     starlarkjson.Module,
		"provider": starlark.NewBuiltin("provider", newBuck2Provider),
	}
}

// predeclareFrom runs the stand-in at path (which alone also sees provider_of) and adds
// its public globals to what every later file sees.
func (in *interpreter) predeclareFrom(path string) error {
	base := in.predeclared
	own := starlark.StringDict{"provider_of": starlark.NewBuiltin("provider_of", providerOf)}
	for k, v := range base {
		own[k] = v
	}
	in.predeclared = own
	globals, err := in.load(path)
	in.predeclared = base
	if err != nil {
		return err
	}
	merged := starlark.StringDict{}
	for k, v := range base {
		merged[k] = v
	}
	for k, v := range globals {
		if !strings.HasPrefix(k, "_") {
			merged[k] = v
		}
	}
	in.predeclared = merged
	return nil
}

func newInterpreter(root string, repos map[string]string) *interpreter {
	in := &interpreter{
		root:      root,
		repos:     repos,
		mainNames: mainRepoNames(root),
		cache:     map[string]*cacheEntry{},
		calls:     []call{},
		asts:      map[string]*parsed{},
	}
	in.predeclared = starlark.StringDict{
		"struct":   starlark.NewBuiltin("struct", starlarkstruct.Make),
		"fail":     starlark.NewBuiltin("fail", bazelFail),
		"json":     starlarkjson.Module,
		"provider": starlark.NewBuiltin("provider", newProvider),
	}
	for _, name := range stubGlobals {
		in.predeclared[name] = &stub{in: in, name: name}
	}
	return in
}

// load executes the file at path once and returns its globals.
func (in *interpreter) load(path string) (starlark.StringDict, error) {
	if e, ok := in.cache[path]; ok {
		if e == nil {
			return nil, fmt.Errorf("cycle in load graph at %s", path)
		}
		return e.globals, e.err
	}
	in.cache[path] = nil
	globals, err := in.exec(path)
	in.cache[path] = &cacheEntry{globals, err}
	return globals, err
}

func (in *interpreter) exec(path string) (starlark.StringDict, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := syntax.Parse(path, src, 0)
	if err != nil {
		return nil, err
	}
	in.asts[path] = &parsed{file: f, src: src}
	if !in.buck2 {
		if err := checkBazel4(f); err != nil {
			return nil, err
		}
	}
	// The names each load() asks for, so that loads of unserved repositories can
	// answer with stubs of exactly those names.
	wanted := map[string][]string{}
	for _, stmt := range f.Stmts {
		if ld, ok := stmt.(*syntax.LoadStmt); ok {
			module := ld.ModuleName()
			for _, from := range ld.From {
				wanted[module] = append(wanted[module], from.Name)
			}
		}
	}
	prog, err := starlark.FileProgram(f, in.predeclared.Has)
	if err != nil {
		return nil, err
	}
	thread := &starlark.Thread{
		Name:  path,
		Print: func(_ *starlark.Thread, msg string) { fmt.Println(msg) },
		Load: func(_ *starlark.Thread, module string) (starlark.StringDict, error) {
			target, external, err := in.resolveLoad(path, module)
			if err != nil {
				return nil, err
			}
			if external {
				stubs := starlark.StringDict{}
				for _, name := range wanted[module] {
					stubs[name] = &stub{in: in, name: name}
				}
				return stubs, nil
			}
			return in.load(target)
		},
	}
	globals, err := prog.Init(thread, in.predeclared)
	if err != nil {
		return nil, err
	}
	// Like Bazel's export of rules and providers: a global bound to a value made by a
	// call takes the global's name, in a stable order.
	names := make([]string, 0, len(globals))
	for name := range globals {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		switch v := globals[name].(type) {
		case *stub:
			if v.unexported {
				v.name, v.unexported = name, false
			}
		case *providerValue:
			if v.name == "" {
				v.name = name
			}
		case *buck2Provider:
			if v.name == "" {
				v.name = name
			}
		}
	}
	globals.Freeze()
	return globals, nil
}

// checkBazel4 rejects what Bazel 4.2.3 rejects and this go.starlark.net accepts (its
// resolve.AllowLambda and AllowNestedDef are no-ops): lambda and def inside def.
func checkBazel4(f *syntax.File) error {
	var err error
	for _, stmt := range f.Stmts {
		top := stmt
		syntax.Walk(stmt, func(n syntax.Node) bool {
			if err != nil {
				return false
			}
			switch n := n.(type) {
			case *syntax.LambdaExpr:
				err = fmt.Errorf("%s: lambda is not supported by Bazel 4, declare a function", n.Lambda)
			case *syntax.DefStmt:
				if n != top {
					err = fmt.Errorf("%s: nested def is not supported by Bazel 4, move %s to the top level", n.Def, n.Name.Name)
				}
			}
			return err == nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// resolveLoad maps a load() argument of the file `from` to a path, or reports that it
// names a repository this interpreter does not serve.
func (in *interpreter) resolveLoad(from, module string) (path string, external bool, err error) {
	switch {
	case strings.HasPrefix(module, "@"):
		repo := strings.TrimLeft(module, "@")
		i := strings.Index(repo, "//")
		if i < 0 {
			return "", false, fmt.Errorf("load(%q): not a label", module)
		}
		name, rest := repo[:i], repo[i:]
		if dir, ok := in.repos[name]; ok {
			return labelPath(dir, rest, module)
		}
		if in.mainNames[name] {
			return labelPath(in.root, rest, module)
		}
		return "", true, nil
	case strings.HasPrefix(module, "//"):
		return labelPath(in.root, module, module)
	case strings.HasPrefix(module, ":"):
		return filepath.Join(in.packageDir(from), module[1:]), false, nil
	case filepath.IsAbs(module):
		return module, false, nil
	default:
		return filepath.Join(filepath.Dir(from), module), false, nil
	}
}

// labelPath turns "//pkg:file" into dir/pkg/file.
func labelPath(dir, label, module string) (string, bool, error) {
	rest := strings.TrimPrefix(label, "//")
	pkg, name := rest, ""
	if i := strings.Index(rest, ":"); i >= 0 {
		pkg, name = rest[:i], rest[i+1:]
	}
	if name == "" {
		return "", false, fmt.Errorf("load(%q): the label names no file", module)
	}
	return filepath.Join(dir, filepath.FromSlash(pkg), filepath.FromSlash(name)), false, nil
}

// packageDir returns the directory of the Bazel package holding file: the nearest
// directory up, within the root, with a BUILD file; the file's own directory otherwise.
func (in *interpreter) packageDir(file string) string {
	dir := filepath.Dir(file)
	if rel, err := filepath.Rel(in.root, dir); err == nil && !strings.HasPrefix(rel, "..") {
		for d := dir; ; d = filepath.Dir(d) {
			for _, build := range []string{"BUILD", "BUILD.bazel"} {
				if st, err := os.Stat(filepath.Join(d, build)); err == nil && !st.IsDir() {
					return d
				}
			}
			if d == in.root || filepath.Dir(d) == d {
				break
			}
		}
	}
	return dir
}

// bazelFail is Bazel's fail(*args, msg=None, attr=None, sep=" ").
func bazelFail(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var msg, attr starlark.Value = starlark.None, starlark.None
	sep := " "
	if err := starlark.UnpackArgs("fail", nil, kwargs, "msg?", &msg, "attr?", &attr, "sep?", &sep); err != nil {
		return nil, err
	}
	parts := []string{}
	if msg != starlark.None {
		parts = append(parts, str(msg))
	}
	for _, v := range args {
		parts = append(parts, str(v))
	}
	text := strings.Join(parts, sep)
	if attr != starlark.None {
		text = fmt.Sprintf("attribute %s: %s", str(attr), text)
	}
	// Go Starlark adds "Error in fail: ", as Bazel does.
	return nil, errors.New(text)
}

func str(v starlark.Value) string {
	if s, ok := starlark.AsString(v); ok {
		return s
	}
	return v.String()
}

// providerValue is what provider() returns: calling it makes a struct. It keeps its doc
// and fields ([{"name", "doc"}], for -doc) and where it was made.
type providerValue struct {
	name   string
	doc    string
	fields []interface{}
	at     string
}

func newProvider(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) > 1 {
		return nil, fmt.Errorf("provider: got %d positional arguments, want at most 1 (doc)", len(args))
	}
	p := &providerValue{fields: []interface{}{}}
	if len(args) == 1 {
		p.doc, _ = starlark.AsString(args[0])
	}
	for _, kv := range kwargs {
		switch string(kv[0].(starlark.String)) {
		case "doc":
			p.doc, _ = starlark.AsString(kv[1])
		case "fields":
			p.fields = providerFields(kv[1])
		}
	}
	if thread.CallStackDepth() > 1 {
		p.at = thread.CallFrame(1).Pos.String()
	}
	return p, nil
}

// providerFields lists provider(fields = ...) as [{"name", "doc"}]: a dict's docs, or a
// list's names with no doc.
func providerFields(v starlark.Value) []interface{} {
	out := []interface{}{}
	switch f := v.(type) {
	case *starlark.Dict:
		for _, item := range f.Items() {
			name, _ := starlark.AsString(item[0])
			doc, _ := starlark.AsString(item[1])
			out = append(out, map[string]interface{}{"name": name, "doc": doc})
		}
	case *starlark.List:
		for i := 0; i < f.Len(); i++ {
			name, _ := starlark.AsString(f.Index(i))
			out = append(out, map[string]interface{}{"name": name, "doc": ""})
		}
	}
	return out
}

func (p *providerValue) String() string {
	if p.name == "" {
		return "<provider>"
	}
	return "<provider " + p.name + ">"
}
func (p *providerValue) Type() string          { return "provider" }
func (p *providerValue) Freeze()               {}
func (p *providerValue) Truth() starlark.Bool  { return starlark.True }
func (p *providerValue) Hash() (uint32, error) { return starlark.String(p.String()).Hash() }
func (p *providerValue) Name() string          { return p.name }
func (p *providerValue) CallInternal(_ *starlark.Thread, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) > 0 {
		return nil, fmt.Errorf("%s: got positional arguments, want keywords", p)
	}
	return starlarkstruct.FromKeywords(p, kwargs), nil
}

// stub stands for one of Bazel's values that this interpreter does not implement.
type stub struct {
	in         *interpreter
	name       string
	unexported bool    // made by a call; named after the global it is first bound to
	origin     *origin // the call that made it, if a call did
}

func (s *stub) String() string        { return "<" + s.name + ">" }
func (s *stub) Type() string          { return "stub" }
func (s *stub) Freeze()               {}
func (s *stub) Truth() starlark.Bool  { return starlark.True }
func (s *stub) Hash() (uint32, error) { return starlark.String(s.name).Hash() }
func (s *stub) Name() string          { return s.name }
func (s *stub) AttrNames() []string   { return nil }

func (s *stub) Attr(name string) (starlark.Value, error) {
	return &stub{in: s.in, name: s.name + "." + name}, nil
}

// Binary lets stubs take part in `+` and friends, e.g. `select({...}) + [...]`.
func (s *stub) Binary(op syntax.Token, _ starlark.Value, _ starlark.Side) (starlark.Value, error) {
	return &stub{in: s.in, name: s.name + " " + op.String() + " ..."}, nil
}

func (s *stub) CallInternal(thread *starlark.Thread, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	c := call{Fn: s.name, Args: []interface{}{}, Kwargs: map[string]interface{}{}}
	for _, a := range args {
		c.Args = append(c.Args, toJSON(a, 0))
	}
	for _, kv := range kwargs {
		c.Kwargs[string(kv[0].(starlark.String))] = toJSON(kv[1], 0)
	}
	var at syntax.Position
	if thread.CallStackDepth() > 1 {
		at = thread.CallFrame(1).Pos
		c.At = at.String()
	}
	s.in.calls = append(s.in.calls, c)
	s.in.instances = append(s.in.instances, instance{callee: s, kwargs: kwargs, at: at})
	made := &origin{fn: s.name, args: args, kwargs: kwargs, at: c.At}
	if s.name == "use_extension" && len(args) >= 2 {
		if ext, ok := starlark.AsString(args[1]); ok {
			return &stub{in: s.in, name: ext, origin: made}, nil
		}
	}
	return &stub{in: s.in, name: s.name + "()", unexported: true, origin: made}, nil
}

// toJSON converts a Starlark value to data for encoding/json.
func toJSON(v starlark.Value, depth int) interface{} {
	if depth > 32 {
		return v.String()
	}
	switch v := v.(type) {
	case starlark.NoneType:
		return nil
	case starlark.Bool:
		return bool(v)
	case starlark.Int:
		if i, ok := v.Int64(); ok {
			return i
		}
		return v.String()
	case starlark.Float:
		return float64(v)
	case starlark.String:
		return string(v)
	case *starlark.List:
		return iterJSON(v, depth)
	case starlark.Tuple:
		return iterJSON(v, depth)
	case *starlark.Dict:
		out := map[string]interface{}{}
		for _, item := range v.Items() {
			out[str(item[0])] = toJSON(item[1], depth+1)
		}
		return out
	case *starlarkstruct.Struct:
		out := map[string]interface{}{}
		for _, name := range v.AttrNames() {
			field, _ := v.Attr(name)
			out[name] = toJSON(field, depth+1)
		}
		return out
	default:
		return v.String()
	}
}

func iterJSON(v starlark.Iterable, depth int) []interface{} {
	out := []interface{}{}
	it := v.Iterate()
	defer it.Done()
	var x starlark.Value
	for it.Next(&x) {
		out = append(out, toJSON(x, depth+1))
	}
	return out
}

// buck2Provider is Buck2's provider(fields = ..., doc = ...): calling it makes a struct
// with every field (None where not given); other fields are an error.
type buck2Provider struct {
	name   string
	fields []string
}

func newBuck2Provider(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var doc string
	var fields starlark.Value
	if err := starlark.UnpackArgs("provider", args, kwargs, "fields", &fields, "doc?", &doc); err != nil {
		return nil, err
	}
	p := &buck2Provider{}
	switch f := fields.(type) {
	case *starlark.List:
		for i := 0; i < f.Len(); i++ {
			s, ok := starlark.AsString(f.Index(i))
			if !ok {
				return nil, fmt.Errorf("provider: field names must be strings, got %s", f.Index(i).Type())
			}
			p.fields = append(p.fields, s)
		}
	case *starlark.Dict:
		for _, k := range f.Keys() {
			s, ok := starlark.AsString(k)
			if !ok {
				return nil, fmt.Errorf("provider: field names must be strings, got %s", k.Type())
			}
			p.fields = append(p.fields, s)
		}
	default:
		return nil, fmt.Errorf("provider: fields must be a list or dict, got %s", fields.Type())
	}
	return p, nil
}

func (p *buck2Provider) String() string {
	if p.name == "" {
		return "<provider>"
	}
	return "<provider " + p.name + ">"
}
func (p *buck2Provider) Type() string          { return "provider" }
func (p *buck2Provider) Freeze()               {}
func (p *buck2Provider) Truth() starlark.Bool  { return starlark.True }
func (p *buck2Provider) Hash() (uint32, error) { return starlark.String(p.String()).Hash() }
func (p *buck2Provider) Name() string          { return p.name }
func (p *buck2Provider) CallInternal(_ *starlark.Thread, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) > 0 {
		return nil, fmt.Errorf("%s: got positional arguments, want keywords", p)
	}
	given := map[string]starlark.Value{}
	for _, kv := range kwargs {
		given[string(kv[0].(starlark.String))] = kv[1]
	}
	values := starlark.StringDict{}
	for _, f := range p.fields {
		if v, ok := given[f]; ok {
			values[f] = v
			delete(given, f)
		} else {
			values[f] = starlark.None
		}
	}
	for f := range given {
		return nil, fmt.Errorf("%s: no field %q (fields: %s)", p, f, strings.Join(p.fields, ", "))
	}
	return starlarkstruct.FromStringDict(p, values), nil
}

// providerOf returns the provider that made a provider instance.
func providerOf(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var v starlark.Value
	if err := starlark.UnpackPositionalArgs("provider_of", args, kwargs, 1, &v); err != nil {
		return nil, err
	}
	s, ok := v.(*starlarkstruct.Struct)
	if !ok {
		return nil, fmt.Errorf("provider_of: want a provider instance, got %s", v.Type())
	}
	return s.Constructor(), nil
}
