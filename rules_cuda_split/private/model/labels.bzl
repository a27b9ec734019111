"""A label as a user writes it, for messages: `//pkg:name` in the main repository (where
Bazel 7 writes `@@//pkg:name`), `@repo//pkg:name` elsewhere, a module's repository by its
module name (`@rules_cuda_split`, not its canonical `@@rules_cuda_split~`)."""

def label_text(label):
    """`label` (a Label, or anything with `workspace_name`, `package` and `name`) as text.

    Args:
      label: the label.

    Returns:
      string.
    """
    repo = label.workspace_name
    if repo.endswith("~") or repo.endswith("+"):
        # A module's own repository: `<module>~` (Bazel 7), `<module>+` (Bazel 8).
        repo = repo[:-1]
    return "%s//%s:%s" % ("@" + repo if repo else "", label.package, label.name)
