"""The agent's own file tools may read ctxwarden's originals but never change them, on any backend.

`ThreadIsolatedBackend` refuses a write, an edit or a deletion of an evicted output or a history file by the agent's
tools, but only where it wraps the backend. On the README's route (deepagents' default `StateBackend`, which ctxwarden
adopts as it is) nothing did: `edit_file` on an evicted output answered "Successfully replaced", and `recall` of it then
said the file had changed since, with nothing more of the original in the thread's reach; `edit_file` on the history
file rewrote what the conversation said. So the call is refused before it runs, whatever the backend: deepagents'
`write_file`, `edit_file` and `delete`, on a path under `/large_tool_results/` or `/conversation_history/` of the
running thread's own (deepagents' own history and media files there excepted, as the isolating backend does). Another
thread's path is left to the backend: an isolating one refuses it as another thread's, without saying what it holds.
"""

from __future__ import annotations

from langchain.tools.tool_node import ToolCallRequest
from langchain_core.messages import ToolMessage

from ctxwarden.core.layout import folder_name
from ctxwarden.core.runtime import running_thread
from ctxwarden.stack.isolation import original_refusal, owner_of

CHANGING_FILE_TOOLS = frozenset({"write_file", "edit_file", "delete"})
"""deepagents' file tools that change a file, each naming it by `file_path`."""


def refused_change(request: ToolCallRequest) -> ToolMessage | None:
    """The refusal of a call of the agent's that would change one of ctxwarden's originals, or `None` (it runs).
    Called while the agent's tool is marked running (`core.runtime.agent_tool`)."""
    call = request.tool_call
    args = call.get("args")
    path = args.get("file_path") if isinstance(args, dict) else None
    if call.get("name") not in CHANGING_FILE_TOOLS or not isinstance(path, str):
        return None
    thread, owner = running_thread(), owner_of(path)
    if thread is not None and owner is not None and owner != folder_name(thread):
        return None  # another thread's: the backend answers (an isolating one refuses it as another thread's)
    why = original_refusal(path)
    if why is None:
        return None
    return ToolMessage(why, tool_call_id=str(call.get("id") or ""), name=str(call.get("name")), status="error")


__all__ = ["CHANGING_FILE_TOOLS", "refused_change"]
