"""Diagnosis: where a hung job is.

It owns the Stacks call (`stacks_call`: every task's Python stacks gathered down the tree and merged on the
way up, asked by a task of the job or by the job's user outside it), the judge's verdict (`judge`: once the
top of the tree judged the job hung on the progress marks, every task's stacks are said once and the step
fails), and the two codecs of a hung job (`marks`: sets of ranks, and the progress marks the watch's beats
carry). It knows nothing of the rounds, nor of failure detection: the detector is handed what it calls.
"""

from __future__ import annotations

__all__: list[str] = []
