"""Learning from the user's own repository: labels, mined sets, tuned weights and routing.

- ``judgments``: `.llmc/judgments.jsonl`, graded labels (0-3) from `llmc label` and feedback;
- ``kappa``: Cohen's kappa between labelers;
- ``querylog``: `.llmc/queries.jsonl`, what was searched;
- ``label``: what to label next, including active learning (``suggest``);
- ``gitmine``: an eval set mined from git history;
- ``intent_model``: a calibrated logistic-regression intent classifier;
- ``tune``: fusion weights and the intent model fit on held-in queries, measured held out;
- ``tuned``: `.llmc/tuned/`, applied by search.

docs/learning.md describes the procedure and the caveats.
"""

from llmc.learn.judgments import Label

__all__ = ["Label"]
