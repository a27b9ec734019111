"""A label as a user writes it, for messages: `//pkg:name` in the main repository (where
Bazel 7 writes `@@//pkg:name`), `@repo//pkg:name` elsewhere, a module's repository by its
module name (`@rules_cuda_split`, not its canonical `@@rules_cuda_split~`)."""

load("//rules_cuda_split/private:compat.bzl", "module_repo_name")

def label_text(label):
    """`label` (a Label, or anything with `workspace_name`, `package` and `name`) as text.

    Args:
      label: the label.

    Returns:
      string.
    """
    repo = module_repo_name(label.workspace_name)
    return "%s//%s:%s" % ("@" + repo if repo else "", label.package, label.name)
