#include "catalog.h"

namespace bench::kernels {

const std::vector<KernelInfo>& catalog() {
  static const std::vector<KernelInfo> k = {
      {"norm_forward", "kernels/norm.h", "LayerNorm / RMSNorm rows: y = (x - [mean]) * rstd * w + b"},
      {"norm_backward", "kernels/norm.h", "dx = rstd (g - [mean g] - xhat mean(g xhat)); dw, db by row groups"},
      {"column_sum", "kernels/norm.h", "out[c] += sum_r part[r, c]"},
      {"softmax_forward", "kernels/softmax.h",
       "masked (causal, window) softmax of scale * s, optional soft-cap, row max"},
      {"softmax_backward", "kernels/softmax.h", "ds = scale * p (dp - sum p dp) (* soft-cap derivative)"},
      {"softcap_forward", "kernels/softcap.h", "logit soft-cap y = c tanh(x / c) (Gemma 2 output logits)"},
      {"softcap_backward", "kernels/softcap.h", "dx = dy (1 - (y / c)^2), from the capped output"},
      {"cross_entropy", "kernels/cross_entropy.h", "loss = logsumexp - logit[target]; z; fused gradient with z-loss"},
      {"rope_apply", "kernels/rope.h",
       "rotate (interleaved or half) feature pairs of q/k by t * theta_i; inverse for backward"},
      {"activation_forward", "kernels/activation.h", "relu, gelu (erf, tanh), silu, relu^2"},
      {"activation_backward", "kernels/activation.h", "derivatives of the activations"},
      {"glu_forward", "kernels/activation.h", "h = act(gate) * up on [gate | up] rows (SwiGLU, GeGLU, ReGLU)"},
      {"glu_backward", "kernels/activation.h", "d gate = dh * up * act'(gate); d up = dh * act(gate)"},
      {"adamw_update", "kernels/adamw.h", "decoupled weight decay, then bias-corrected Adam"},
      {"add / axpy / scale", "kernels/elementwise.h", "element-wise arithmetic"},
      {"sum_of / sum_squares", "kernels/elementwise.h",
       "deterministic two-stage sum of x^2 (grad norm), x (logit mean) or -x ln x (attention entropy)"},
      {"embedding_forward", "kernels/elementwise.h", "gather rows of the embedding table"},
      {"embedding_backward", "kernels/elementwise.h", "scatter-add into the table, race-free"},
      {"attention_forward", "kernels/attention.h",
       "causal GQA attention: GEMMs + masked softmax (CPU: oneDNN; CUDA: cuBLASLt, kernels/cuda/attention.cu)"},
      {"attention_backward", "kernels/attention.h", "dq, dk, dv through the saved probabilities"},
      {"gemm", "kernels/gemm.h", "fp32: oneDNN dnnl_sgemm (CUDA: cuBLASLt, no TF32); fp64: reference loop"},
      {"flash_attention_forward / backward", "kernels/cuda/flash_attention.cuh",
       "bf16 fused attention on the tensor cores (mma.sync), every variant; CUDA only, the bf16 model's attention "
       "where attention_uses_flash says so"},
  };
  return k;
}

}  // namespace bench::kernels
