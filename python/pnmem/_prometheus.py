"""pnmem's Prometheus families as a prometheus_client collector, over pnmem_metrics_text.

prometheus_client is optional: this module imports it only when a collector is made, so `import pnmem`
never needs it (apt-get install python3-prometheus-client, or pip install prometheus-client).

    from prometheus_client import CollectorRegistry, generate_latest
    registry = CollectorRegistry()
    pnmem.register_prometheus(registry)           # or registry.register(pnmem.PrometheusCollector())
    print(generate_latest(registry).decode())     # pnmem's families, sampled at each scrape

The families are parsed from pnmem's own text (format 0.0.4), so their names, HELP, TYPE, labels and
values are pnmem's. prometheus_client keeps a counter's name without its `_total` (the parser strips
it, the exposition adds it back): `pnmem_admissions_total` in the text is a family named
`pnmem_admissions` here, exposed as `pnmem_admissions_total` again. Values are floats, as
prometheus_client holds them (integers past 2**53 round).
"""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Callable, Iterator, List, Optional

from ._core import _METRICS_WHAT, ArgumentError, Error, metrics_text

if TYPE_CHECKING:  # prometheus_client's types, for the type checker only: never imported at run time here
    from prometheus_client.metrics_core import Metric
    from prometheus_client.registry import Collector as _CollectorBase
    from prometheus_client.registry import CollectorRegistry
else:
    # At run time the base is object (prometheus_client is optional); the first collector made
    # registers the class as a virtual subclass of prometheus_client's Collector ABC (_parser), so
    # what the type checker is told holds for every PrometheusCollector that exists.
    _CollectorBase = object


class PrometheusClientMissing(Error, ImportError):
    """prometheus_client is not importable, so no collector can be made; the message says how to
    install it. An ImportError and a pnmem.Error."""

    def __init__(self, message: str, function: str = "pnmem_metrics_text") -> None:
        super().__init__(message, function)
        self.name = "prometheus_client"


def _parser(who: str) -> Callable[[str], Iterator["Metric"]]:
    try:
        import prometheus_client  # noqa: F401  (raises when absent, or None in sys.modules)
        from prometheus_client import registry
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError as e:
        raise PrometheusClientMissing(
            f"{who} needs prometheus_client, which {sys.executable} cannot import ({e}): "
            "apt-get install python3-prometheus-client, or pip install prometheus-client") from e
    collector_abc = getattr(registry, "Collector", None)  # an ABC since prometheus_client 0.14
    if collector_abc is not None and not issubclass(PrometheusCollector, collector_abc):
        collector_abc.register(PrometheusCollector)
    return text_string_to_metric_families


class PrometheusCollector(_CollectorBase):
    """A prometheus_client collector of pnmem_metrics_text: each collect() reads pnmem's text exposition
    now ("box": the snapshot's families; "counters": what this library's calls counted; "all": both)
    and yields it as prometheus_client metric families. Register it on a CollectorRegistry (or use
    register_prometheus). Without prometheus_client, making one raises PrometheusClientMissing.

    A prometheus_client.registry.Collector to a type checker and to isinstance (a virtual subclass of
    that ABC, registered when the first one is made), so CollectorRegistry.register(collector)
    type-checks; at run time it does not inherit from it, since prometheus_client is optional."""

    def __init__(self, what: str = "all") -> None:
        f = "pnmem_metrics_text"
        if not isinstance(what, str) or what not in _METRICS_WHAT:
            raise ArgumentError(f"{f}: what must be one of box, counters, all, not {what!r}", f)
        self._parse = _parser("pnmem.PrometheusCollector")
        self.what = what

    def collect(self) -> Iterator["Metric"]:
        """pnmem_metrics_text(what), parsed: the families a scrape exposes. A failed call raises
        pnmem.Error (the scrape fails rather than exposing nothing)."""
        yield from self._parse(metrics_text(self.what))

    def describe(self) -> List["Metric"]:
        """The families pnmem exposes now, for the registry's names: registering reads pnmem_metrics_text
        once, so the registry refuses a second collector of the same families (duplicated timeseries)
        and restricted_registry (a scrape's name[] filter) finds them. Without describe, a registry
        with auto_describe (prometheus_client.REGISTRY) would call collect() for the same; one without
        would record no names at all. A family that appears later (a die fed after registering) is
        still collected, only not in those names."""
        return list(self.collect())

    def __repr__(self) -> str:
        return f"pnmem.PrometheusCollector(what={self.what!r})"


def register_prometheus(registry: Optional["CollectorRegistry"] = None, what: str = "all") -> PrometheusCollector:
    """Registers a PrometheusCollector(what) on `registry` (prometheus_client.REGISTRY by default, what
    start_http_server and generate_latest() serve) and returns it, for registry.unregister(collector).
    Raises PrometheusClientMissing without prometheus_client, ValueError (prometheus_client's) when the
    registry already has a pnmem family."""
    collector = PrometheusCollector(what)
    if registry is None:
        import prometheus_client
        registry = prometheus_client.REGISTRY
    registry.register(collector)
    return collector

