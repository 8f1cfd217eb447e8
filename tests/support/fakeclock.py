"""A clock and a sleep for the wait loop (core/waiting.wait_until), so a wait of minutes takes no time."""

from __future__ import annotations


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds
