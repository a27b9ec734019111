"""The REAPI messages nvcc-split's client uses, built from descriptors written here.

No protoc, no generated modules: `_SCHEMA` lists, per message, the fields the client
(cuda_split.remote.reapi) uses, with their numbers and types exactly as in
build/bazel/remote/execution/v2/remote_execution.proto, google/longrunning/operations.proto,
google/rpc/status.proto and google/bytestream/bytestream.proto. Fields it does not use
are left out; a server's messages parse all the same (unknown fields are kept).
`tests/remote/test_driver_remote.py` checks every field against BuildGrid's generated modules.
The classes are built at import time in a private descriptor pool (`POOL`).
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

# Field types and labels of descriptor.proto.
_F = descriptor_pb2.FieldDescriptorProto
_SCALARS = {
    "string": _F.TYPE_STRING,
    "bytes": _F.TYPE_BYTES,
    "bool": _F.TYPE_BOOL,
    "int32": _F.TYPE_INT32,
    "int64": _F.TYPE_INT64,
}

# proto file -> (package, dependencies, messages). A message is (name, fields, nested
# messages); a field is (name, number, type, repeated, oneof index or None). A type that
# is not a scalar is a message's full name.
RE_V2 = "build.bazel.remote.execution.v2"
_SCHEMA: dict[str, tuple[str, list[str], list[tuple[str, list[tuple], list[tuple]]]]] = {
    "google/rpc/status.proto": (
        "google.rpc",
        ["google/protobuf/any.proto"],
        [
            (
                "Status",
                [
                    ("code", 1, "int32", False, None),
                    ("message", 2, "string", False, None),
                    ("details", 3, "google.protobuf.Any", True, None),
                ],
                [],
            ),
        ],
    ),
    "google/longrunning/operations.proto": (
        "google.longrunning",
        ["google/protobuf/any.proto", "google/rpc/status.proto"],
        [
            (
                "Operation",
                [
                    ("name", 1, "string", False, None),
                    ("metadata", 2, "google.protobuf.Any", False, None),
                    ("done", 3, "bool", False, None),
                    ("error", 4, "google.rpc.Status", False, 0),  # oneof result
                    ("response", 5, "google.protobuf.Any", False, 0),
                ],
                [],
            ),
        ],
    ),
    "google/bytestream/bytestream.proto": (
        "google.bytestream",
        [],
        [
            (
                "ReadRequest",
                [
                    ("resource_name", 1, "string", False, None),
                    ("read_offset", 2, "int64", False, None),
                    ("read_limit", 3, "int64", False, None),
                ],
                [],
            ),
            ("ReadResponse", [("data", 10, "bytes", False, None)], []),
            (
                "WriteRequest",
                [
                    ("resource_name", 1, "string", False, None),
                    ("write_offset", 2, "int64", False, None),
                    ("finish_write", 3, "bool", False, None),
                    ("data", 10, "bytes", False, None),
                ],
                [],
            ),
            ("WriteResponse", [("committed_size", 1, "int64", False, None)], []),
        ],
    ),
    "build/bazel/remote/execution/v2/remote_execution.proto": (
        RE_V2,
        ["google/rpc/status.proto", "google/protobuf/timestamp.proto"],
        [
            (
                "Digest",
                [
                    ("hash", 1, "string", False, None),
                    ("size_bytes", 2, "int64", False, None),
                ],
                [],
            ),
            (
                "Platform",
                [("properties", 1, f"{RE_V2}.Platform.Property", True, None)],
                [
                    (
                        "Property",
                        [
                            ("name", 1, "string", False, None),
                            ("value", 2, "string", False, None),
                        ],
                        [],
                    ),
                ],
            ),
            (
                "Action",
                [
                    ("command_digest", 1, f"{RE_V2}.Digest", False, None),
                    ("input_root_digest", 2, f"{RE_V2}.Digest", False, None),
                    ("do_not_cache", 7, "bool", False, None),
                    ("salt", 9, "bytes", False, None),
                    ("platform", 10, f"{RE_V2}.Platform", False, None),
                ],
                [],
            ),
            (
                "Command",
                [
                    ("arguments", 1, "string", True, None),
                    (
                        "environment_variables",
                        2,
                        f"{RE_V2}.Command.EnvironmentVariable",
                        True,
                        None,
                    ),
                    ("output_files", 3, "string", True, None),
                    ("output_directories", 4, "string", True, None),
                    ("platform", 5, f"{RE_V2}.Platform", False, None),
                    ("working_directory", 6, "string", False, None),
                    ("output_paths", 7, "string", True, None),
                ],
                [
                    (
                        "EnvironmentVariable",
                        [
                            ("name", 1, "string", False, None),
                            ("value", 2, "string", False, None),
                        ],
                        [],
                    ),
                ],
            ),
            (
                "FileNode",
                [
                    ("name", 1, "string", False, None),
                    ("digest", 2, f"{RE_V2}.Digest", False, None),
                    ("is_executable", 4, "bool", False, None),
                ],
                [],
            ),
            (
                "DirectoryNode",
                [
                    ("name", 1, "string", False, None),
                    ("digest", 2, f"{RE_V2}.Digest", False, None),
                ],
                [],
            ),
            (
                "Directory",
                [
                    ("files", 1, f"{RE_V2}.FileNode", True, None),
                    ("directories", 2, f"{RE_V2}.DirectoryNode", True, None),
                ],
                [],
            ),
            (
                "OutputFile",
                [
                    ("path", 1, "string", False, None),
                    ("digest", 2, f"{RE_V2}.Digest", False, None),
                    ("is_executable", 4, "bool", False, None),
                    ("contents", 5, "bytes", False, None),
                ],
                [],
            ),
            (
                "ExecutedActionMetadata",
                [
                    ("worker", 1, "string", False, None),
                    ("worker_start_timestamp", 3, "google.protobuf.Timestamp", False, None),
                    ("worker_completed_timestamp", 4, "google.protobuf.Timestamp", False, None),
                    ("execution_start_timestamp", 7, "google.protobuf.Timestamp", False, None),
                    ("execution_completed_timestamp", 8, "google.protobuf.Timestamp", False, None),
                ],
                [],
            ),
            (
                "ActionResult",
                [
                    ("output_files", 2, f"{RE_V2}.OutputFile", True, None),
                    ("exit_code", 4, "int32", False, None),
                    ("stdout_raw", 5, "bytes", False, None),
                    ("stdout_digest", 6, f"{RE_V2}.Digest", False, None),
                    ("stderr_raw", 7, "bytes", False, None),
                    ("stderr_digest", 8, f"{RE_V2}.Digest", False, None),
                    ("execution_metadata", 9, f"{RE_V2}.ExecutedActionMetadata", False, None),
                ],
                [],
            ),
            (
                "GetActionResultRequest",
                [
                    ("instance_name", 1, "string", False, None),
                    ("action_digest", 2, f"{RE_V2}.Digest", False, None),
                    ("inline_stdout", 3, "bool", False, None),
                    ("inline_stderr", 4, "bool", False, None),
                    ("inline_output_files", 5, "string", True, None),
                ],
                [],
            ),
            (
                "UpdateActionResultRequest",
                [
                    ("instance_name", 1, "string", False, None),
                    ("action_digest", 2, f"{RE_V2}.Digest", False, None),
                    ("action_result", 3, f"{RE_V2}.ActionResult", False, None),
                ],
                [],
            ),
            (
                "FindMissingBlobsRequest",
                [
                    ("instance_name", 1, "string", False, None),
                    ("blob_digests", 2, f"{RE_V2}.Digest", True, None),
                ],
                [],
            ),
            (
                "FindMissingBlobsResponse",
                [
                    ("missing_blob_digests", 2, f"{RE_V2}.Digest", True, None),
                ],
                [],
            ),
            (
                "BatchUpdateBlobsRequest",
                [
                    ("instance_name", 1, "string", False, None),
                    ("requests", 2, f"{RE_V2}.BatchUpdateBlobsRequest.Request", True, None),
                ],
                [
                    (
                        "Request",
                        [
                            ("digest", 1, f"{RE_V2}.Digest", False, None),
                            ("data", 2, "bytes", False, None),
                        ],
                        [],
                    ),
                ],
            ),
            (
                "BatchUpdateBlobsResponse",
                [
                    ("responses", 1, f"{RE_V2}.BatchUpdateBlobsResponse.Response", True, None),
                ],
                [
                    (
                        "Response",
                        [
                            ("digest", 1, f"{RE_V2}.Digest", False, None),
                            ("status", 2, "google.rpc.Status", False, None),
                        ],
                        [],
                    ),
                ],
            ),
            (
                "BatchReadBlobsRequest",
                [
                    ("instance_name", 1, "string", False, None),
                    ("digests", 2, f"{RE_V2}.Digest", True, None),
                ],
                [],
            ),
            (
                "BatchReadBlobsResponse",
                [
                    ("responses", 1, f"{RE_V2}.BatchReadBlobsResponse.Response", True, None),
                ],
                [
                    (
                        "Response",
                        [
                            ("digest", 1, f"{RE_V2}.Digest", False, None),
                            ("data", 2, "bytes", False, None),
                            ("status", 3, "google.rpc.Status", False, None),
                        ],
                        [],
                    ),
                ],
            ),
            (
                "ExecuteRequest",
                [
                    ("instance_name", 1, "string", False, None),
                    ("skip_cache_lookup", 3, "bool", False, None),
                    ("action_digest", 6, f"{RE_V2}.Digest", False, None),
                ],
                [],
            ),
            (
                "ExecuteResponse",
                [
                    ("result", 1, f"{RE_V2}.ActionResult", False, None),
                    ("cached_result", 2, "bool", False, None),
                    ("status", 3, "google.rpc.Status", False, None),
                    ("message", 5, "string", False, None),
                ],
                [],
            ),
            ("WaitExecutionRequest", [("name", 1, "string", False, None)], []),
        ],
    ),
}

# The oneof of google.longrunning.Operation (index 0 above).
_ONEOFS = {"google.longrunning.Operation": ["result"]}


def _message_proto(
    package: str, name: str, fields: list[tuple], nested: list[tuple]
) -> descriptor_pb2.DescriptorProto:
    msg = descriptor_pb2.DescriptorProto(name=name)
    full = f"{package}.{name}"
    for oneof in _ONEOFS.get(full, []):
        msg.oneof_decl.add(name=oneof)
    for fname, number, ftype, repeated, oneof_index in fields:
        f = msg.field.add(name=fname, number=number, json_name=_camel(fname))
        f.label = _F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL
        if ftype in _SCALARS:
            f.type = _SCALARS[ftype]
        else:
            f.type = _F.TYPE_MESSAGE
            f.type_name = "." + ftype
        if oneof_index is not None:
            f.oneof_index = oneof_index
    for n_name, n_fields, n_nested in nested:
        msg.nested_type.append(_message_proto(full, n_name, n_fields, n_nested))
    return msg


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(w.capitalize() for w in rest)


def _build_pool() -> descriptor_pool.DescriptorPool:
    # A private pool: no clash with generated REAPI modules loaded in the same process.
    pool = descriptor_pool.DescriptorPool()
    from google.protobuf import any_pb2

    for module in (any_pb2, timestamp_pb2):
        pool.AddSerializedFile(module.DESCRIPTOR.serialized_pb)
    for file_name, (package, deps, messages) in _SCHEMA.items():
        fp = descriptor_pb2.FileDescriptorProto(
            name=file_name, package=package, syntax="proto3", dependency=deps
        )
        for name, fields, nested in messages:
            fp.message_type.append(_message_proto(package, name, fields, nested))
        pool.AddSerializedFile(fp.SerializeToString())
    return pool


POOL = _build_pool()


def message_class(full_name: str) -> Any:
    """The Python class of a message of the schema (`build.bazel...v2.Digest`)."""
    return message_factory.GetMessageClass(POOL.FindMessageTypeByName(full_name))


Digest = message_class(f"{RE_V2}.Digest")
Platform = message_class(f"{RE_V2}.Platform")
Action = message_class(f"{RE_V2}.Action")
Command = message_class(f"{RE_V2}.Command")
FileNode = message_class(f"{RE_V2}.FileNode")
DirectoryNode = message_class(f"{RE_V2}.DirectoryNode")
Directory = message_class(f"{RE_V2}.Directory")
OutputFile = message_class(f"{RE_V2}.OutputFile")
ActionResult = message_class(f"{RE_V2}.ActionResult")
GetActionResultRequest = message_class(f"{RE_V2}.GetActionResultRequest")
UpdateActionResultRequest = message_class(f"{RE_V2}.UpdateActionResultRequest")
FindMissingBlobsRequest = message_class(f"{RE_V2}.FindMissingBlobsRequest")
FindMissingBlobsResponse = message_class(f"{RE_V2}.FindMissingBlobsResponse")
BatchUpdateBlobsRequest = message_class(f"{RE_V2}.BatchUpdateBlobsRequest")
BatchUpdateBlobsResponse = message_class(f"{RE_V2}.BatchUpdateBlobsResponse")
BatchReadBlobsRequest = message_class(f"{RE_V2}.BatchReadBlobsRequest")
BatchReadBlobsResponse = message_class(f"{RE_V2}.BatchReadBlobsResponse")
ExecuteRequest = message_class(f"{RE_V2}.ExecuteRequest")
ExecuteResponse = message_class(f"{RE_V2}.ExecuteResponse")
WaitExecutionRequest = message_class(f"{RE_V2}.WaitExecutionRequest")
Operation = message_class("google.longrunning.Operation")
Status = message_class("google.rpc.Status")
ReadRequest = message_class("google.bytestream.ReadRequest")
ReadResponse = message_class("google.bytestream.ReadResponse")
WriteRequest = message_class("google.bytestream.WriteRequest")
WriteResponse = message_class("google.bytestream.WriteResponse")

EXECUTE_RESPONSE_TYPE = f"type.googleapis.com/{RE_V2}.ExecuteResponse"
