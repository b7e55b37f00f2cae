"""The demo: a real recorded session replayed through the embedded defaults."""

from ctxwarden.demo.run import (
    DEFAULT_WINDOW,
    TRAJECTORY_CREDIT,
    DemoResult,
    default_trajectory,
    render,
    run_demo,
)

__all__ = ["DEFAULT_WINDOW", "TRAJECTORY_CREDIT", "DemoResult", "default_trajectory", "render", "run_demo"]
