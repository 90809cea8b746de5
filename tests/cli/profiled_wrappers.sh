#!/bin/sh
# profiled_wrappers.sh: every kernel runtime/kernels.h declares (a function k_NAME) has its
# --profile wrapper in runtime/profiled.h (a macro of the same name), or is one that stage code does
# not call, named below with the reason; and the check fails on a copy of profiled.h without
# k_rope's wrapper.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1

# KERNEL or KERNEL:WRAPPER: not called by stage code, or called through WRAPPER (which must be
# wrapped).
NOT_STAGE_KERNELS="
k_to_act                    the weights' act_t copies, after the optimizer step
k_gemm_rate                 plait calibrate's measure of the GEMM rate
k_attention_available       which attention kernels a program can run: no work
k_attention_choose
k_attention_path
k_embedding_forward:rt_embedding_forward
k_embedding_backward:rt_embedding_backward
k_xent_max:rt_xent_forward  the cross entropy's steps, with its all-reduces between them
k_xent_sums:rt_xent_forward
k_xent_loss:rt_xent_forward
k_xent_backward:rt_xent_backward
k_xent_forward_grad:rt_xent_forward_grad
"

# The k_NAME functions declared in kernels.h (comment lines left out), one a line.
kernels() { grep -v '^ *\(/\*\|\*\)' "$1" | grep -o '\bk_[a-z0-9_]*(' | tr -d '(' | sort -u; }

# The kernels of KERNELS_H with no wrapper in PROFILED_H (nor through their WRAPPER), one a line.
unwrapped() {
  for k in $(kernels "$1"); do
    entry=$(echo "$NOT_STAGE_KERNELS" |
      awk -v k="$k" '{ split($1, f, ":") } f[1] == k { print $1 }')
    wrapper=${entry#*:}
    [ -n "$entry" ] && [ "$wrapper" = "$entry" ] && continue
    [ -n "$entry" ] && k=$wrapper
    grep -q "^#define $k(" "$2" || echo "$k"
  done
}

count=$(kernels runtime/kernels.h | wc -l)
missing=$(unwrapped runtime/kernels.h runtime/profiled.h)
if [ "$count" -ge 20 ] && [ -z "$missing" ]; then pass "every_kernel_profiled ($count kernels)"
else fail every_kernel_profiled "$count kernels found; without a wrapper: $(echo $missing)"; fi

grep -v '^#define k_rope(' runtime/profiled.h >"$TMP/profiled.h"
missing=$(unwrapped runtime/kernels.h "$TMP/profiled.h")
if [ "$missing" = k_rope ]; then pass missing_wrapper_found
else
  fail missing_wrapper_found "k_rope's wrapper taken out, found without one: '$(echo $missing)'"
fi
