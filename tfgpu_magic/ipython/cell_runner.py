"""Running a cell magic's body the way IPython runs a plain cell: the same compile, AST transforms, display of
the last value and error display, with none of the magic's frames. ``%%tfgpu device`` runs its cell here,
inside ``tf.device``; the placement controller brackets it.
"""

from __future__ import annotations

import ast
from typing import Any


def run_body(shell: Any, cell: str) -> Any:
    """Run ``cell`` inside the running shell cell: an error is shown and recorded on that cell (so it still
    fails) and None returned. Outside a shell cell it runs plainly: the last expression's value is returned and
    errors propagate to the caller."""
    __tracebackhide__ = True
    result = getattr(getattr(shell, "displayhook", None), "exec_result", None)
    if result is None:
        return _exec_plainly(shell, cell)
    raw = getattr(getattr(result, "info", None), "raw_cell", None) or ""
    # The magic line is the cell's first: a blank line in its place keeps line numbers as typed.
    source = "\n" + shell.transform_cell(cell)
    cell_name = shell.compile.cache(source, shell.execution_count, raw_code=raw if raw.count("\n") else source)
    try:
        tree = shell.compile.ast_parse(source, filename=cell_name)
        tree = shell.transform_ast(tree)
    except (OverflowError, SyntaxError, ValueError, TypeError, MemoryError) as err:
        shell.showsyntaxerror()
        result.error_in_exec = err
        return None
    from IPython.core.async_helpers import _pseudo_sync_runner

    _pseudo_sync_runner(shell.run_ast_nodes(tree.body, cell_name, interactivity=shell.ast_node_interactivity,
                                            compiler=shell.compile, result=result))
    return None


def _exec_plainly(shell: Any, cell: str) -> Any:
    __tracebackhide__ = True
    source = shell.transform_cell(cell)
    tree = shell.transform_ast(shell.compile.ast_parse(source, filename="<tfgpu device cell>"))
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
        ast.fix_missing_locations(last)
    exec(shell.compile(tree, "<tfgpu device cell>", "exec"), shell.user_ns)
    if last is not None:
        return eval(shell.compile(last, "<tfgpu device cell>", "eval"), shell.user_ns)
    return None
