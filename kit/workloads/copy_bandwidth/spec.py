"""The copy-bandwidth workload as the driver sees it (nvbandwidth's testcases, one run)."""

from kit.workloads.base import Phrase, Silent, WorkloadSpec, metrics
from kit.workloads.copy_bandwidth.params import CopyBandwidthParams

METHOD = """\
<b>{{ a.label }}.</b> Measured as NVIDIA's nvbandwidth measures it: one process drives every GPU;
a sample holds the stream with a spin kernel while a start event, {{ a.params.loop_count }} copies of
{{ a.params.size_mib }} MiB and an end event are queued, then releases it; bandwidth = bytes x copies /
time (decimal GB/s), the median of {{ a.params.samples }} samples. Host-to-device and device-to-host
use pinned host memory on the GPU's NUMA node and the copy engine (cudaMemcpyAsync);
device-local copy counts the bytes once, as nvbandwidth's device_local_copy does (the memory
moves twice that). The plateau sweep repeats them on the first GPU from {{ a.params.plateau_min_mib }}
MiB up. {% if a.params.pairs is not sameas false %}Every GPU pair (row = source, column =
destination): copy-engine and SM (a copy kernel on the source GPU) copies of
{{ a.params.pair_size_mib }} MiB, one way and both ways at once (the two directions added,
nvbandwidth's Total), median of {{ a.params.pair_samples }} samples of
{{ a.params.pair_loop_count }} copies; latency: the time of one 4-byte copy among
{{ a.params.latency_copies }} back-to-back ones{% if a.params.staged is not sameas false %}; staged:
the same pairs through pinned host memory in 4 MiB double-buffered chunks (the path a copy takes
with peer access off), host clock{% endif %}.{% else %}GPU pairs: not measured (the recipe set
<code>pairs: false</code>).{% endif %} Every copy is checked (wrong elements). The headline is
the weakest GPU's figure: a slow slot or a throttled part shows there. On the CPU: host memory copies only, each rank in turn at the
full size (a rank stands where a GPU would)."""

SPEC = WorkloadSpec(
    kind="copy_bandwidth",
    label="copy bandwidth",
    description="nvbandwidth-style host link, HBM and GPU-pair copy bandwidth",
    params=CopyBandwidthParams,
    headline="device_local_gbps",
    secondary=("h2d_gbps", "d2h_gbps", "pair_ce_one_way_gbps"),
    figures="matrix",
    method=METHOD,
    ran=(Phrase(("size_mib",), "{} MiB copies"),),
    silent=Silent(
        "pairs",
        False,
        "pairs: false copies within each GPU and between each GPU and the host only: no data "
        "moves between GPUs, so peer-to-peer has nothing to carry and P2P on against off says "
        "nothing about the link",
    ),
    metrics=metrics(
        "device_local_gbps",
        "h2d_gbps",
        "d2h_gbps",
        "pair_ce_one_way_gbps",
        "pair_ce_both_ways_gbps",
        "pair_sm_one_way_gbps",
        "pair_sm_both_ways_gbps",
        "pair_staged_one_way_gbps",
        "pair_latency_us",
        "wrong_total",
    ),
)
