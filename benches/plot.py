"""Draw benches/results.png from the figures in benches/results.md (typed in below from that file).

python3 benches/plot.py   (needs matplotlib)
"""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

# CPU, 2-core build machine, AES-256-GCM, 64 MiB, GiB/s (results.md, commit dcd62fb)
cpu = {
    "gcmx Cpu": 6.52,
    "gcmx CpuParallel\n(2 cores)": 12.82,
    "aes-gcm 0.11": 2.12,
    "ring": 6.51,
    "aws-lc-rs": 3.68,
}
# H200, 4 GiB in device memory, GB/s (results.md, commit 699ccb2)
gpu = {
    "device read\n(ceiling)": 4470,
    "GHASH clmad": 4480,
    "GHASH soft": 510,
    "AES-128-GCM\nfused": 508,
    "AES-256-GCM\nfused": 373,
    "AES-256-CTR\nT-table peer": 299,
    "gcmx CPU\n16 threads": 47.4,
}

fig, (a, b) = plt.subplots(1, 2, figsize=(13, 4.8))
a.bar(list(cpu), list(cpu.values()), color=["#1f77b4", "#1f77b4", "#999", "#999", "#999"])
a.set_ylabel("GiB/s")
a.set_title("AES-256-GCM encrypt, 64 MiB, 2-core CPU")
for i, v in enumerate(cpu.values()):
    a.text(i, v, f"{v:.2f}", ha="center", va="bottom")
b.bar(list(gpu), list(gpu.values()), color=["#999", "#2ca02c", "#2ca02c", "#2ca02c", "#2ca02c", "#999", "#1f77b4"])
b.set_yscale("log")
b.set_ylabel("GB/s (log)")
b.set_title("H200, 4 GiB in device memory")
for i, v in enumerate(gpu.values()):
    b.text(i, v, f"{v:g}", ha="center", va="bottom")
for ax in (a, b):
    ax.tick_params(axis="x", labelsize=7)
fig.tight_layout()
fig.savefig("benches/results.png", dpi=110)
print("wrote benches/results.png")
