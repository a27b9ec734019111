// With -doc OUT, the interpreter writes what FILE documents as JSON to OUT, as Stardoc's
// extractor would from Bazel: the module docstring, each public global (a name not
// starting with "_", bound by an assignment or a def of FILE, in source order) and, for
// a BUILD file, the targets it declares. scripts/gen/reference_doc.py renders it as
// docs/reference.md.
//
//	{"file": "...", "doc": "module docstring",
//	 "symbols": [{"name", "kind", "at", ...}],
//	 "targets": [{"name", "kind", "at", "kwargs", "rule": {a symbol of kind rule}}]}
//
// Kinds and what each carries besides name, kind and at (the position of the call or def
// that made it, the same wherever the value is re-exported):
//   - rule, macro, aspect, repository_rule, tag_class: doc, attrs; a rule: executable,
//     test, build_setting ({"type", "flag"}); an aspect: attr_aspects;
//   - module_extension: doc, tag_classes (each {"name", "doc", "attrs"});
//   - provider: doc, fields ([{"name", "doc"}]);
//   - function: doc, params ([{"name", "default"?, "kind"}]; kind: "positional",
//     "keyword_only", "varargs" or "kwargs"; default: the expression's source text);
//   - value: type, repr (Starlark's repr; stubs as the call that made them).
//
// An attribute is {"name", "type" ("string", "label_list", ...), "doc", "mandatory",
// "default"?} with default the repr of the value given, absent when none was.
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"
)

// origin is the call of a stub that made a stub: `rule(...)` made `cuda_library`.
type origin struct {
	fn     string
	args   starlark.Tuple
	kwargs []starlark.Tuple
	at     string
}

// instance is one call of a stub: a target declared by a BUILD file, among others.
type instance struct {
	callee *stub
	kwargs []starlark.Tuple
	at     syntax.Position
}

// parsed is a file's syntax tree and source, for docstrings and parameter defaults.
type parsed struct {
	file *syntax.File
	src  []byte
}

func (o *origin) kwarg(name string) starlark.Value {
	for _, kv := range o.kwargs {
		if string(kv[0].(starlark.String)) == name {
			return kv[1]
		}
	}
	return nil
}

func (o *origin) stringKwarg(name string) string {
	if v := o.kwarg(name); v != nil {
		if s, ok := starlark.AsString(v); ok {
			return s
		}
	}
	return ""
}

func (o *origin) boolKwarg(name string) bool {
	v := o.kwarg(name)
	return v != nil && bool(v.Truth())
}

// writeDoc writes the documentation of the file at path (already loaded) to out.
func (in *interpreter) writeDoc(path, out string) error {
	p := in.asts[path]
	globals := in.cache[path].globals
	rel, err := filepath.Rel(in.root, path)
	if err != nil {
		rel = path
	}
	doc := map[string]interface{}{
		"file":    filepath.ToSlash(rel),
		"doc":     moduleDoc(p.file),
		"symbols": in.symbols(p.file, globals),
		"targets": in.targets(path),
	}
	data, err := jsonIndent(doc)
	if err != nil {
		return err
	}
	return os.WriteFile(out, data, 0o644)
}

func moduleDoc(f *syntax.File) string {
	if len(f.Stmts) > 0 {
		if e, ok := f.Stmts[0].(*syntax.ExprStmt); ok {
			if lit, ok := e.X.(*syntax.Literal); ok && lit.Token == syntax.STRING {
				return lit.Value.(string)
			}
		}
	}
	return ""
}

// symbols describes the public globals bound by f's own statements, in source order.
func (in *interpreter) symbols(f *syntax.File, globals starlark.StringDict) []interface{} {
	out := []interface{}{}
	seen := map[string]bool{}
	add := func(name string) {
		if strings.HasPrefix(name, "_") || seen[name] {
			return
		}
		seen[name] = true
		if v, ok := globals[name]; ok {
			d := in.describe(v)
			d["name"] = name
			out = append(out, d)
		}
	}
	for _, stmt := range f.Stmts {
		switch s := stmt.(type) {
		case *syntax.AssignStmt:
			if id, ok := s.LHS.(*syntax.Ident); ok {
				add(id.Name)
			}
		case *syntax.DefStmt:
			add(s.Name.Name)
		}
	}
	return out
}

// targets describes the calls of rules (and of the predeclared toolchain_type) made by
// the top level of the file at path: the targets of a BUILD file. A call of a rule this
// interpreter does not read (skylib's string_flag, loaded from a repository it does not
// serve) counts when it has a build_setting_default: it declares a build setting.
func (in *interpreter) targets(path string) []interface{} {
	out := []interface{}{}
	for _, inst := range in.instances {
		if inst.at.Filename() != path {
			continue
		}
		isRule := inst.callee.origin != nil &&
			(inst.callee.origin.fn == "rule" || inst.callee.origin.fn == "macro")
		isSetting := kwargFrom(inst.kwargs, "build_setting_default") != starlark.None
		if !isRule && !isSetting && inst.callee.name != "toolchain_type" {
			continue
		}
		kwargs := map[string]interface{}{}
		for _, kv := range inst.kwargs {
			kwargs[string(kv[0].(starlark.String))] = repr(kv[1])
		}
		name, _ := starlark.AsString(kwargFrom(inst.kwargs, "name"))
		t := map[string]interface{}{
			"name":   name,
			"kind":   inst.callee.name,
			"at":     inst.at.String(),
			"kwargs": kwargs,
		}
		if isRule {
			rule := in.describe(inst.callee)
			rule["name"] = inst.callee.name
			t["rule"] = rule
		}
		out = append(out, t)
	}
	return out
}

func kwargFrom(kwargs []starlark.Tuple, name string) starlark.Value {
	for _, kv := range kwargs {
		if string(kv[0].(starlark.String)) == name {
			return kv[1]
		}
	}
	return starlark.None
}

// describe says what a value is, for the reference.
func (in *interpreter) describe(v starlark.Value) map[string]interface{} {
	switch v := v.(type) {
	case *starlark.Function:
		return in.describeFunction(v)
	case *providerValue:
		return map[string]interface{}{
			"kind":   "provider",
			"doc":    v.doc,
			"fields": v.fields,
			"at":     v.at,
		}
	case *stub:
		if v.origin != nil {
			if d := describeOrigin(v.origin); d != nil {
				return d
			}
		}
	}
	return map[string]interface{}{"kind": "value", "type": v.Type(), "repr": repr(v)}
}

func describeOrigin(o *origin) map[string]interface{} {
	switch o.fn {
	case "rule", "macro", "aspect", "repository_rule", "tag_class":
	case "module_extension":
		classes := []interface{}{}
		if d, ok := o.kwarg("tag_classes").(*starlark.Dict); ok {
			for _, item := range d.Items() {
				name, _ := starlark.AsString(item[0])
				class := map[string]interface{}{"name": name, "doc": "", "attrs": []interface{}{}}
				if s, ok := item[1].(*stub); ok && s.origin != nil {
					class["doc"] = s.origin.stringKwarg("doc")
					class["attrs"] = describeAttrs(s.origin.kwarg("attrs"))
				}
				classes = append(classes, class)
			}
		}
		return map[string]interface{}{
			"kind":        "module_extension",
			"doc":         o.stringKwarg("doc"),
			"tag_classes": classes,
			"at":          o.at,
		}
	default:
		return nil
	}
	d := map[string]interface{}{
		"kind":  o.fn,
		"doc":   o.stringKwarg("doc"),
		"attrs": describeAttrs(o.kwarg("attrs")),
		"at":    o.at,
	}
	switch o.fn {
	case "rule":
		d["executable"] = o.boolKwarg("executable")
		d["test"] = o.boolKwarg("test")
		if s, ok := o.kwarg("build_setting").(*stub); ok && s.origin != nil {
			d["build_setting"] = map[string]interface{}{
				"type": strings.TrimPrefix(s.origin.fn, "config."),
				"flag": s.origin.boolKwarg("flag"),
			}
		}
	case "aspect":
		if v := o.kwarg("attr_aspects"); v != nil {
			d["attr_aspects"] = toJSON(v, 0)
		}
	}
	return d
}

// describeAttrs describes a dict of attr.*() values, in the dict's order.
func describeAttrs(v starlark.Value) []interface{} {
	out := []interface{}{}
	dict, ok := v.(*starlark.Dict)
	if !ok {
		return out
	}
	for _, item := range dict.Items() {
		name, _ := starlark.AsString(item[0])
		a := map[string]interface{}{"name": name, "type": "unknown", "doc": "", "mandatory": false}
		if s, ok := item[1].(*stub); ok && s.origin != nil {
			a["type"] = strings.TrimPrefix(s.origin.fn, "attr.")
			a["doc"] = s.origin.stringKwarg("doc")
			a["mandatory"] = s.origin.boolKwarg("mandatory")
			if def := s.origin.kwarg("default"); def != nil {
				a["default"] = repr(def)
			}
		}
		out = append(out, a)
	}
	return out
}

func (in *interpreter) describeFunction(fn *starlark.Function) map[string]interface{} {
	pos := fn.Position()
	d := map[string]interface{}{
		"kind":   "function",
		"doc":    fn.Doc(),
		"at":     pos.String(),
		"params": []interface{}{},
	}
	def, src := in.findDef(pos)
	if def == nil {
		return d
	}
	params := []interface{}{}
	kind := "positional"
	for _, p := range def.Params {
		switch p := p.(type) {
		case *syntax.Ident:
			params = append(params, map[string]interface{}{"name": p.Name, "kind": kind})
		case *syntax.BinaryExpr:
			name := p.X.(*syntax.Ident).Name
			param := map[string]interface{}{
				"name":    name,
				"kind":    kind,
				"default": sourceText(src, p.Y),
			}
			if value, ok := in.evalDefault(fn, pos.Filename(), def, p.Y); ok && value != param["default"] {
				param["value"] = value
			}
			params = append(params, param)
		case *syntax.UnaryExpr:
			if p.Op == syntax.STARSTAR {
				params = append(params, map[string]interface{}{
					"name": p.X.(*syntax.Ident).Name, "kind": "kwargs",
				})
			} else {
				if p.X != nil {
					params = append(params, map[string]interface{}{
						"name": p.X.(*syntax.Ident).Name, "kind": "varargs",
					})
				}
				kind = "keyword_only"
			}
		}
	}
	d["params"] = params
	return d
}

// evalDefault evaluates a parameter's default expression where the def is, with the
// module's globals and what its file loads: `[_DEFAULT_VERSION]` is `["13.0"]`.
func (in *interpreter) evalDefault(fn *starlark.Function, path string, def *syntax.DefStmt, e syntax.Expr) (string, bool) {
	env := starlark.StringDict{}
	for k, v := range in.predeclared {
		env[k] = v
	}
	for k, v := range fn.Globals() {
		env[k] = v
	}
	for _, stmt := range in.asts[path].file.Stmts {
		ld, ok := stmt.(*syntax.LoadStmt)
		if !ok {
			continue
		}
		target, external, err := in.resolveLoad(path, ld.ModuleName())
		if err != nil || external || in.cache[target] == nil {
			continue
		}
		for i, from := range ld.From {
			if v, ok := in.cache[target].globals[from.Name]; ok {
				env[ld.To[i].Name] = v
			}
		}
	}
	v, err := starlark.EvalExpr(&starlark.Thread{Name: "default"}, e, env)
	if err != nil {
		return "", false
	}
	return repr(v), true
}

// findDef returns the top-level def at pos (a function's def token) and its file's source.
func (in *interpreter) findDef(pos syntax.Position) (*syntax.DefStmt, []byte) {
	p, ok := in.asts[pos.Filename()]
	if !ok {
		return nil, nil
	}
	for _, stmt := range p.file.Stmts {
		if def, ok := stmt.(*syntax.DefStmt); ok && def.Def.Line == pos.Line && def.Def.Col == pos.Col {
			return def, p.src
		}
	}
	return nil, nil
}

// sourceText is the source of expression e, as written (on one line, spaces collapsed).
func sourceText(src []byte, e syntax.Expr) string {
	start, end := e.Span()
	from, to := offset(src, start), offset(src, end)
	if from < 0 || to < from {
		return "?"
	}
	return strings.Join(strings.Fields(string(src[from:to])), " ")
}

// offset turns a 1-based line and rune column into a byte offset of src (-1 if outside).
func offset(src []byte, pos syntax.Position) int {
	line, i := int32(1), 0
	for line < pos.Line {
		j := bytes.IndexByte(src[i:], '\n')
		if j < 0 {
			return -1
		}
		i += j + 1
		line++
	}
	for col := int32(1); col < pos.Col; col++ {
		if i >= len(src) {
			return -1
		}
		_, size := utf8.DecodeRune(src[i:])
		i += size
	}
	return i
}

// repr is Starlark's repr of v, with stubs written as the call that made them.
func repr(v starlark.Value) string {
	switch v := v.(type) {
	case *stub:
		if v.origin == nil {
			return v.name
		}
		parts := []string{}
		for _, a := range v.origin.args {
			parts = append(parts, repr(a))
		}
		for _, kv := range v.origin.kwargs {
			parts = append(parts, fmt.Sprintf("%s = %s", kv[0].(starlark.String), repr(kv[1])))
		}
		return v.origin.fn + "(" + strings.Join(parts, ", ") + ")"
	case *starlark.List:
		return "[" + joinRepr(v) + "]"
	case starlark.Tuple:
		return "(" + joinRepr(v) + ")"
	case *starlark.Dict:
		parts := []string{}
		for _, item := range v.Items() {
			parts = append(parts, repr(item[0])+": "+repr(item[1]))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case *starlarkstruct.Struct:
		return v.String()
	default:
		return v.String()
	}
}

func joinRepr(v starlark.Iterable) string {
	parts := []string{}
	it := v.Iterate()
	defer it.Done()
	var x starlark.Value
	for it.Next(&x) {
		parts = append(parts, repr(x))
	}
	return strings.Join(parts, ", ")
}
