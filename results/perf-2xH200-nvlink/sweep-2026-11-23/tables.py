import json,sys
import os
S=os.path.dirname(os.path.abspath(__file__))+"/"
def load(f): return [json.loads(l) for l in open(f)]
data={m:{(r['collective'],r['bytes'],r['implementation']):r for r in load(S+m+".jsonl")} for m in ("stream","graph")}
colls=["barrier","sync","all_reduce","broadcast","fcollect","alltoall","reduce_scatter","reduce","gather","scatter"]
def t(m,c,b,i):
    r=data[m].get((c,b,i))
    return r['time_us'] if r and r['status']=='ok' else None
def bw(m,c,b,i):
    r=data[m].get((c,b,i))
    return r['busbw_gbs'] if r and r['status']=='ok' else None
f=lambda x,p=2: ("%.*f"%(p,x)) if x is not None else "-"
which=sys.argv[1]
if which=="small":
    print("| collective | size | stream: rs | NVSHMEM | NCCL | rs/best | graph: rs | NVSHMEM | NCCL | rs/best | rs/NCCL (graph) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for c in colls:
        for b in ([0] if c in("barrier","sync") else [8,4096,65536,1048576]):
            row=[c, {0:"-",8:"8 B",4096:"4 KiB",65536:"64 KiB",1048576:"1 MiB"}[b]]
            for m in ("stream","graph"):
                a,n,k=t(m,c,b,"nvshmem-rs"),t(m,c,b,"nvshmem"),t(m,c,b,"nccl")
                best=min([x for x in (n,k) if x is not None], default=None)
                row+= [f(a),f(n),f(k), f(a/best) if best else "-"]
            k=t("graph",c,b,"nccl"); a=t("graph",c,b,"nvshmem-rs")
            row.append(f(a/k) if k else "-")
            print("| "+" | ".join(row)+" |")
else:
    print("| collective | size | mode | rs GB/s | NVSHMEM | NCCL | rs time / best other |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for c in colls[2:]:
        for b in (1<<20,16<<20,128<<20,256<<20):
            for m in ("stream","graph"):
                a,n,k=bw(m,c,b,"nvshmem-rs"),bw(m,c,b,"nvshmem"),bw(m,c,b,"nccl")
                at=t(m,c,b,"nvshmem-rs"); others=[x for x in (t(m,c,b,"nvshmem"),t(m,c,b,"nccl")) if x]
                print("| %s | %s | %s | %s | %s | %s | %s |"%(c,{1<<20:"1 MiB",16<<20:"16 MiB",128<<20:"128 MiB",256<<20:"256 MiB"}[b],m,f(a,0),f(n,0),f(k,0),f(at/min(others)) if others else "-"))
