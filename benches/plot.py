"""Draw benches/results.png from the figures in benches/results.md (typed in below from that file).

python3 benches/plot.py   (needs matplotlib)
"""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

# CPU, one core, AES-256-GCM encryption, 1 MiB, GiB/s: Zen 5 VM (results.md, commit abd2180)
cpu = {
    "gcmx Cpu": 22.21,
    "aws-lc-rs": 21.36,
    "ring": 9.78,
    "aes-gcm 0.11": 3.28,
}
# H200, GB/s (gpu-notes.md, run of 2026-12-01 22:20 UTC, commits 6f5ef68..adf6096): 4 GiB in device
# memory, and 65,536 x 16 KiB messages in
# one device-resident batch
gpu = {
    "device read\n(ceiling)": 4490,
    "GHASH clmad": 4500,
    "GHASH soft": 490,
    "AES-128-GCM\nfused": 500,
    "AES-256-GCM\nfused": 372,
    "AES-256-GCM\n16 KiB batch": 338,
    "AES-256-CTR\nT-table peer": 299,
    "gcmx CPU\n16 threads": 50.7,
}

fig, (a, b) = plt.subplots(1, 2, figsize=(13, 4.8))
a.bar(list(cpu), list(cpu.values()), color=["#1f77b4", "#999", "#999", "#999"])
a.set_ylabel("GiB/s")
a.set_title("AES-256-GCM encrypt, 1 MiB, one core (Zen 5)")
for i, v in enumerate(cpu.values()):
    a.text(i, v, f"{v:.2f}", ha="center", va="bottom")
b.bar(list(gpu), list(gpu.values()), color=["#999", "#2ca02c", "#2ca02c", "#2ca02c", "#2ca02c", "#2ca02c", "#999", "#1f77b4"])
b.set_yscale("log")
b.set_ylabel("GB/s (log)")
b.set_title("H200: 4 GiB in device memory, and a 16 KiB batch")
for i, v in enumerate(gpu.values()):
    b.text(i, v, f"{v:g}", ha="center", va="bottom")
for ax in (a, b):
    ax.tick_params(axis="x", labelsize=7)
fig.tight_layout()
fig.savefig("benches/results.png", dpi=110)
print("wrote benches/results.png")
