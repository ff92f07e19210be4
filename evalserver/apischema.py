"""What the OpenAPI schema (drf-spectacular) says of every operation, beyond each view's own answers.

Any API request can meet the database restarting (``evalserver.middleware``: 503 with
Retry-After) or a server fault (``evalserver.errors.server_error``: 500), both as the same
``{"errors": [...]}`` body as every other API error: a client's script should know them from the
schema, not from an outage. The views' own statuses are in their ``extend_schema``.
"""

from __future__ import annotations

from typing import Any

ERRORS = {"type": "object", "required": ["errors"],
          "properties": {"errors": {"type": "array", "items": {"type": "string"}}}}
COMMON = {
    "503": ("the database is restarting or unreachable: try again after Retry-After seconds",
            {"Retry-After": {"schema": {"type": "integer"}, "description": "seconds to wait before trying again"}}),
    "500": ("a fault of the server (logged for the operators); the answer never holds a traceback", {}),
}


def common_answers(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """drf-spectacular's post-processing hook: the answers any operation may give, added to each."""
    result.setdefault("components", {}).setdefault("schemas", {}).setdefault("Errors", ERRORS)
    for methods in result.get("paths", {}).values():
        for operation in methods.values():
            answers = operation.setdefault("responses", {})
            for status, (description, headers) in COMMON.items():
                answer = answers.setdefault(status, {
                    "description": description,
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Errors"}}}})
                if headers:  # a view's own 503 (the upload's: too many at once) has the same header
                    answer.setdefault("headers", {}).update(headers)
    return result
