"""A short soak in the suite: mixed operations from several workers, every byte checked."""

from soak import soak


def test_short_soak_loses_nothing():
    stats = soak(seconds=8, workers=4)
    ops = sum(stats.get(k, 0) for k in ("put", "get", "delete", "list"))
    assert stats.get("errors", 0) == 0, stats.get("first_error")
    assert stats.get("losses", 0) == 0
    assert ops > 100
    assert stats["alive"]
    assert stats["rss_peak_mib"] < 150, stats
