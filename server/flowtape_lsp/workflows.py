"""The `@workflow` functions of a flow file, as its text shows them (parsed, nothing imported):
where each is (for its code lenses) and the inputs it declares (for "▶ Run")."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from . import protocol as P


@dataclass
class WorkflowSite:
    name: str
    line0: int  # the first decorator's line (0-based)
    def_line0: int
    inputs: list[P.InputInfo] | None  # its declared inputs; None: not to be told from the source


def is_workflow(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    if isinstance(target, ast.Name):
        return target.id == "workflow"
    if isinstance(target, ast.Attribute):
        return target.attr == "workflow"
    return False


def find_workflows(text: str) -> list[WorkflowSite]:
    """The `@workflow` functions of a module (top level, or under top-level `if`/`try`)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    found: list[WorkflowSite] = []
    stack: list[ast.stmt] = list(reversed(tree.body))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            decorators = [d for d in node.decorator_list if is_workflow(d)]
            if decorators:
                first = min(d.lineno for d in node.decorator_list)
                found.append(WorkflowSite(node.name, first - 1, node.lineno - 1, _declared_inputs(decorators[0])))
        elif isinstance(node, (ast.If, ast.Try)):
            children: list[ast.stmt] = [*node.body, *node.orelse]
            if isinstance(node, ast.Try):
                for handler in node.handlers:
                    children.extend(handler.body)
                children.extend(node.finalbody)
            stack.extend(reversed(children))
    found.sort(key=lambda w: w.line0)
    return found


def _declared_inputs(decorator: ast.expr) -> list[P.InputInfo] | None:
    """The `inputs={...}` of `@workflow(...)`: [] when it declares none, None when the source
    cannot tell (a dict built elsewhere)."""
    if not isinstance(decorator, ast.Call):
        return []
    given = next((k.value for k in decorator.keywords if k.arg == "inputs"), None)
    if given is None or (isinstance(given, ast.Constant) and given.value is None):
        return []
    if not isinstance(given, ast.Dict) or not all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in given.keys):
        return None
    return [P.InputInfo(name=str(k.value), type=ast.unparse(v), required=True) for k, v in zip(given.keys, given.values, strict=True)
            if isinstance(k, ast.Constant)]
