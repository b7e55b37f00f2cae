"""Replay of recorded agent sessions: the recording, a replaying chat model and replaying tools."""

from ctxwarden.replay.driver import areplay_into, replay_into
from ctxwarden.replay.model import ReplayChatModel
from ctxwarden.replay.recording import RecordedTurn, Recording, load_recording, parse_recording
from ctxwarden.replay.scripted import ScriptedChatModel, scripted_model
from ctxwarden.replay.tools import replay_tools

__all__ = [
    "RecordedTurn",
    "Recording",
    "ReplayChatModel",
    "ScriptedChatModel",
    "areplay_into",
    "load_recording",
    "parse_recording",
    "replay_into",
    "replay_tools",
    "scripted_model",
]
