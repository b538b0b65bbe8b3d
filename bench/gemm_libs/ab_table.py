"""A/B table: ratio current/patched jag time per cell, range over runs.
Drops samples caught by the 4/8 ms CPU-quota stall floor (both sides slow,
or a time at a multiple of 4 ms below 50 ms, or a 50x gap)."""
import collections
cells=collections.defaultdict(list)
q=lambda t: 0.0039<=t<0.05 and abs(t/0.004-round(t/0.004))<0.01
def add(path, modes, has_round=True):
    for l in open(path):
        p=l.strip().split(',')
        if has_round: p=p[1:]
        if not p or p[0] not in modes: continue
        mode,m,k,n=p[0],int(p[1]),int(p[2]),int(p[3]); a,b=float(p[4]),float(p[5])
        fl=2*m*k*n/1e9
        if (a>=0.0039 and b>=0.0039 and min(fl/a,fl/b)<40) or q(a) or q(b) or max(a,b)/min(a,b)>50: continue
        cells[(mode,m,k,n)].append(a/b)
add('ab_raw.csv',('nn',)); add('ab2_raw.csv',('nn','nt')); add('ab2_nt_r3.csv',('nt',),False)
kns=[(256,256),(1024,1024),(256,1024),(1024,256),(4096,1024)]
for mode in ('nn','nt'):
    for m in (1,7,26,128,2048):
        out=[]
        for k,n in kns:
            v=cells.get((mode,m,k,n),[])
            out.append(f"{min(v):.2f}-{max(v):.2f}" if len(v)>1 else (f"{v[0]:.2f}" if v else "-"))
        print(f"| {mode} | {m} | "+" | ".join(out)+" |")
