import sys, torch
sys.path.insert(0, "benchmarks")
import triton_matmul, triton
m=n=k=4096
a=torch.randn(m,k,device="cuda",dtype=torch.half); b=torch.randn(k,n,device="cuda",dtype=torch.half)
c=torch.empty(m,n,device="cuda",dtype=torch.half)
kern=triton_matmul.tutorial_matmul_kernel
grid=(triton.cdiv(m,128)*triton.cdiv(n,256),)
for _ in range(4):
    kern[grid](a,b,c,m,n,k,a.stride(0),a.stride(1),b.stride(0),b.stride(1),c.stride(0),c.stride(1),0.01,ACTIVATION="",INPUT_PRECISION="tf32",num_warps=8,num_stages=4,BLOCK_SIZE_M=128,BLOCK_SIZE_N=256,BLOCK_SIZE_K=64,GROUP_SIZE_M=8)
torch.cuda.synchronize()
print("triton ok", (c.float()-(a.float()@b.float())).abs().max().item())
