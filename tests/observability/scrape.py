"""Reading GET /metrics the way Prometheus does: the text format, parsed."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    """A sample's value; 0 when the series does not exist (yet)."""
    return samples.get((name, frozenset(labels.items())), 0.0)
