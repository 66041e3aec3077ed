"""HeaPA (heap sampling + on-policy query augmentation, arXiv 2601.22448) and the Prioritized
Sampling baseline, behind the Selector interface. Importing this package registers "heapa" and
"ps".

    records.py   the record row, locations, packed heap keys (imports nothing of the pool)
    pool.py      cold FIFO, low/high heaps, boundary sampler, eviction, archive, recycling;
                 the column-store views of its records
    ps.py        the Prioritized Sampling pool (sum tree)
    augment.py   on-policy candidate queries (arith prefix continuation; the spec's tag template)
    teacher.py   asynchronous annotation: programmatic arith teacher, HTTP chat-completions teacher
    lineage.py   parent -> children graph, ChildAgg / PathAgg re-estimation
    config.py    the selectors' config fields (paper symbols) and their validation
    selector.py  the selectors and the list of deviations from the paper and the released code
    bench.py     host-time and memory profile of the pool at large sizes

Layer "selection", as the package around it: no jax.
"""

from frontier_rl.selection.heapa import selector  # noqa: F401  (registers "heapa" and "ps")
