"""A slow, obviously correct, plain-Python statement of SEMANTICS.md "Clusters as they are".

Independent of perfmodel's code (no numpy, no perfmodel imports): it builds a handoff's flows and their
paths one by one from the contract's words, names every resource by a string, fills rates by the
textbook water-filling (every unfrozen flow's rate rises by the same step until a resource is full),
and moves bytes interval by interval. A cluster here is a plain dict of the contract's field names;
a model is given by its KV heads and one head's bytes per token.
"""

from __future__ import annotations

import math


def node_of(gpu, c):
    return gpu // c["gpus_per_node"]


def local(gpu, c):
    return gpu % c["gpus_per_node"]


def place(c, tp, decode_tp, prefill_workers=1, decode_workers=1):
    """Precise rule 2: (prefill workers' GPUs, decode workers' GPUs), global GPU indices."""
    g = c["gpus_per_node"]
    cursor = 0
    prefill, decode = [], []
    for kind, size, count in (("p", tp, prefill_workers), ("d", decode_tp, decode_workers)):
        if kind == "d" and cursor % g:
            cursor += g - cursor % g  # decode workers from the next whole node
        for _ in range(count):
            if size <= g:
                if cursor % g + size > g:
                    cursor += g - cursor % g
            elif cursor % g:
                cursor += g - cursor % g
            gpus = list(range(cursor, cursor + size))
            cursor += size
            (prefill if kind == "p" else decode).append(gpus)
    return prefill, decode


def heads_of(rank, t, H):
    """Precise rule 1: the heads rank ``rank`` of ``t`` holds (contiguous ranges, or one replicated head)."""
    if H % t == 0:
        per = H // t
        return list(range(rank * per, rank * per + per))
    if t % H == 0:
        return [rank * H // t]
    raise ValueError("refused pair")


def nics_of(gpu, c, *, as_built=False):
    """The NIC indices (within the node) that a GPU uses (rules 3-4); a NIC map's entry instead (one NIC per GPU or
    fewer), and where that NIC is down the next one up, around. ``as_built``: the rules' own, map and NICs down
    aside."""
    n, g = c["nics_per_node"], c["gpus_per_node"]
    i = local(gpu, c)
    if n > g:
        k = n // g
        return [i * k + m for m in range(k)]
    nic = i * n // g
    if not as_built:
        if c.get("nic_map") is not None:
            nic = c["nic_map"][i]
        while nic in (c.get("nics_down") or ()):
            nic = (nic + 1) % n
    return [nic]


def switch_of_nic(nic, c):
    """The PCIe switch a NIC sits behind: the switch of the first GPU that uses it as built."""
    users = [i for i in range(c["gpus_per_node"]) if nic in nics_of(i, c, as_built=True)]
    return users[0] // c["gpus_per_pcie_switch"]


def crosses_host(c):
    """Whether some GPU of a node uses a NIC behind another PCIe switch than its own."""
    if not c.get("gpus_per_pcie_switch"):
        return False
    s = c["gpus_per_pcie_switch"]
    return any(switch_of_nic(nic, c) != i // s for i in range(c["gpus_per_node"]) for nic in nics_of(i, c))


def pcie_crossed(gpu, nic, direction, c, caps):
    """The PCIe resources a flow of ``gpu`` through ``nic`` crosses that way: its GPU's switch, and where the NIC
    sits behind another switch, the host bridge and that switch."""
    if not c.get("gpus_per_pcie_switch"):
        return []
    node, mine, theirs = node_of(gpu, c), local(gpu, c) // c["gpus_per_pcie_switch"], switch_of_nic(nic, c)
    names = [f"node{node}:pcie{mine}-{direction}"]
    caps[names[0]] = c["pcie_switch_gb_s"]
    if theirs != mine:
        host, other = f"node{node}:host-{direction}", f"node{node}:pcie{theirs}-{direction}"
        caps[host], caps[other] = c["host_bridge_gb_s"], c["pcie_switch_gb_s"]
        names += [host, other]
    return names


def nvlink_joined(a, b, c):
    domain = c.get("nvlink_domain", 1)
    return domain > 1 and a // domain == b // domain


def subflow_paths(src, dst, c, nodes_on_leaf):
    """[(path of resource names, capacity of each resource, hops, link latency)] of one flow's sub-flows."""
    caps = {}
    if nvlink_joined(src, dst, c):
        out, into = f"gpu{src}:nvlink-out", f"gpu{dst}:nvlink-in"
        caps[out] = caps[into] = c["nvlink_gb_s"]
        return [([out, into], caps, 0, c.get("nvlink_latency_ms", 0.0))]
    nic_cap = c["nic_gb_s"] * c.get("efficiency", 1.0)
    leaf_cap = nodes_on_leaf * c["nic_gb_s"] / c.get("oversubscription", 1.0)
    result = []
    for a, b in zip(nics_of(src, c), nics_of(dst, c)):
        path = []
        name = f"node{node_of(src, c)}:nic{a}-out"
        path.append(name)
        caps[name] = nic_cap
        path += pcie_crossed(src, a, "out", c, caps)
        hops = 1
        if c.get("fabric", "flat") == "rail" and a != b:
            hops = 3
            up, down = f"leaf{a}:up", f"leaf{b}:down"
            path += [up, down]
            caps[up] = caps[down] = leaf_cap
        name = f"node{node_of(dst, c)}:nic{b}-in"
        path.append(name)
        caps[name] = nic_cap
        path += pcie_crossed(dst, b, "in", c, caps)
        if c.get("node_gb_s"):  # a transport's node-wide limit (a TCP stack): each end's node
            out, into = f"node{node_of(src, c)}:stack-out", f"node{node_of(dst, c)}:stack-in"
            caps[out] = caps[into] = c["node_gb_s"]
            path += [out, into]
        result.append((path, dict(caps), hops, c.get("nic_latency_ms", 0.0)))
    return result


def flows(c, H, head_bytes, p, d, state_bytes=0.0, prefill_gpus=None, decode_gpus=None, nodes_on_leaf=None):
    """The flows of one handoff: dicts of source/destination rank and GPU, bytes, path, hops, latency.

    ``head_bytes`` is the bytes of one KV head (an MLA latent: H = 1) for the charged tokens;
    ``state_bytes`` what each decode rank receives of the model's state."""
    if prefill_gpus is None:
        (prefill_gpus,), (decode_gpus,) = place(c, p, d)
    if nodes_on_leaf is None:
        nodes_on_leaf = c.get("nodes") or len({node_of(x, c) for x in prefill_gpus + decode_gpus})
    holders = {}
    for i in range(p):
        for h in heads_of(i, p, H):
            holders.setdefault(h, []).append(i)
    needed_count = {}
    carried = {}  # (i, j) -> bytes
    for j in range(d):
        heads = heads_of(j, d, H)
        for h in heads:
            m = needed_count.get(h, 0)
            needed_count[h] = m + 1
            source = holders[h][m % len(holders[h])]
            extra = state_bytes if h == heads[0] else 0.0
            carried[(source, j)] = carried.get((source, j), 0.0) + head_bytes + extra
    result = []
    for (i, j), nbytes in sorted(carried.items()):
        if nbytes <= 0:
            continue
        subs = subflow_paths(prefill_gpus[i], decode_gpus[j], c, nodes_on_leaf)
        for m, (path, caps, hops, latency) in enumerate(subs):
            result.append(
                dict(
                    i=i,
                    j=j,
                    m=m,
                    src=prefill_gpus[i],
                    dst=decode_gpus[j],
                    bytes=nbytes / len(subs),
                    path=path,
                    caps=caps,
                    hops=hops,
                    latency=latency,
                )
            )
    return result


def water_fill(active):
    """Max-min fair rates of ``active`` flows (dicts with path and caps): raise every unfrozen flow's
    rate together until some resource is full, freeze the flows crossing it, repeat."""
    rates = {id(f): 0.0 for f in active}
    frozen = set()
    caps = {}
    for f in active:
        caps.update(f["caps"])
    while len(frozen) < len(active):
        step = math.inf
        for r, cap in caps.items():
            users = [f for f in active if r in f["path"]]
            free = [f for f in users if id(f) not in frozen]
            if free:
                used = sum(rates[id(f)] for f in users)
                step = min(step, (cap - used) / len(free))
        if step == math.inf:
            for f in active:
                if id(f) not in frozen:
                    rates[id(f)] = math.inf
                    frozen.add(id(f))
            break
        for f in active:
            if id(f) not in frozen:
                rates[id(f)] += step
        for r, cap in caps.items():
            users = [f for f in active if r in f["path"]]
            if sum(rates[id(f)] for f in users) >= cap * (1 - 1e-12):
                for f in users:
                    frozen.add(id(f))
    return rates


def simulate(all_flows, start_ms):
    """End time (ms) of each flow (by position) when each starts at ``start_ms[k]`` and shares max-min fairly."""
    left = [f["bytes"] for f in all_flows]
    end = [None] * len(all_flows)
    t = min(start_ms) if start_ms else 0.0
    while any(e is None for e in end):
        active = [k for k, f in enumerate(all_flows) if end[k] is None and start_ms[k] <= t]
        rates = water_fill([all_flows[k] for k in active]) if active else {}
        future = [s for k, s in enumerate(start_ms) if end[k] is None and s > t]
        finish = [t + left[k] / (rates[id(all_flows[k])] * 1e9) * 1000 for k in active]
        t_next = min(future + finish)
        for k in active:
            rate = rates[id(all_flows[k])]
            left[k] -= rate * 1e9 * (t_next - t) / 1000
            if left[k] <= 1e-6 * all_flows[k]["bytes"] or math.isinf(rate):
                end[k] = t_next
        t = t_next
    return end


def handoff_ms(c, H, head_bytes, p, d, fixed_ms=0.0, state_bytes=0.0):
    """A handoff alone: its last flow's end (every flow paying ``fixed_ms`` plus its link's latency and hops)."""
    fl = flows(c, H, head_bytes, p, d, state_bytes)
    if not fl:
        return 0.0
    starts = [fixed_ms + f["latency"] + f["hops"] * c.get("hop_latency_ms", 0.0) for f in fl]
    return max(simulate(fl, starts))


def many_handoffs_ms(c, H, head_bytes, p, d, pairs, prefill_workers, decode_workers):
    """Several handoffs at one instant (``pairs``: (prefill worker, decode worker) each): each one's end."""
    prefill, decode = place(c, p, d, prefill_workers, decode_workers)
    nodes = c.get("nodes") or len({node_of(x, c) for w in prefill + decode for x in w})
    everything, owner = [], []
    for number, (a, b) in enumerate(pairs):
        for f in flows(c, H, head_bytes, p, d, prefill_gpus=prefill[a], decode_gpus=decode[b], nodes_on_leaf=nodes):
            everything.append(f)
            owner.append(number)
    starts = [f["latency"] + f["hops"] * c.get("hop_latency_ms", 0.0) for f in everything]
    ends = simulate(everything, starts)
    return [max(e for e, o in zip(ends, owner) if o == number) for number in range(len(pairs))]
