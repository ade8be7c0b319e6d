"""Plain helpers of the split generators (no Hugging Face imports): balancing and the disjointness checks."""

from lengthgen.cli import UsageError


def balanced_counts(total: int, capacities: dict[int, int]) -> dict[int, int]:
    """Split `total` over depths as evenly as their capacities allow (water-filling, shallow depths first). Fewer
    problems than depths go one each to depths spread evenly from the shallowest to the deepest."""
    usable = sorted(d for d, capacity in capacities.items() if capacity > 0)
    if 1 < total < len(usable):
        picked = {usable[round(i * (len(usable) - 1) / (total - 1))] for i in range(total)}
        return {d: int(d in picked) for d in sorted(capacities)}
    counts, remaining, depths = {}, total, sorted(capacities)
    for i, depth in enumerate(depths):
        share = remaining // (len(depths) - i)
        counts[depth] = min(share, capacities[depth])
        remaining -= counts[depth]
    if remaining:
        raise UsageError(f"Cannot place {total} problems in depths {depths} (capacities {capacities}).")
    return counts


def assert_splits_disjoint(splits: dict[str, list[dict]], ignore=("validation_iid",)) -> None:
    """No two splits share a difficulty (an IID validation split shares the training depths on purpose)."""
    names = [name for name in splits if name not in ignore]
    for a_index, a in enumerate(names):
        for b in names[a_index + 1 :]:
            shared = {r["difficulty"] for r in splits[a]} & {r["difficulty"] for r in splits[b]}
            if shared:
                raise UsageError(f"splits {a} and {b} overlap at difficulties {sorted(shared)[:10]}")


def check_ranges(least: int, **ranges: tuple[int, int] | None) -> None:
    """The configured difficulty ranges of a length split (`train_depths=(1, 5), test_depths=(9, 10)`; None: not
    given) are each [low, high] with `least` <= low <= high, and no two share a difficulty: checked before anything is
    drawn, so overlapping ranges are refused even when a small sample would draw no shared difficulty."""
    given = {name: value for name, value in ranges.items() if value is not None}
    for name, value in given.items():
        if len(value) != 2 or not all(isinstance(v, int) for v in value) or not least <= value[0] <= value[1]:
            raise UsageError(f"{name} must be [low, high] with {least} <= low <= high, got {list(value)}.")
    names = list(given)
    for a_index, a in enumerate(names):
        for b in names[a_index + 1 :]:
            low, high = max(given[a][0], given[b][0]), min(given[a][1], given[b][1])
            if low <= high:
                raise UsageError(f"{a} {list(given[a])} and {b} {list(given[b])} overlap at {low}-{high}: a length "
                                 "split's ranges must be disjoint.")
