# cuda.mk: the CUDA build, included by the Makefile; where nvcc is missing it adds only gpu-check.
#   build/libplait_rt_cuda.a  the runtime of GPU programs: the runtime's shared C with PLAIT_CUDA and runtime/cuda/*.c
#                             (cc), runtime/cuda/*.cu (nvcc, sm_90 and PTX for compute_90), the NVRTC prelude
#   build/libplait_rt_ref.a   the CPU runtime with a plain C GEMM and without MPI: the GPU check's reference
#   build/tests/cuda/, build/gpu/  the checks `make test` runs without a GPU, and the programs of the GPU check
#   make gpu-check            every check that needs a GPU (tests/gpu/run.sh), with nothing but nvcc and
#                             CUDA's libraries: no Lua, OpenBLAS, MPI or network; its report goes to
#                             REPORT_DIR (docs/ by default)
#   make gpu-bundle           build/gpu-bundle/: the GPU check's programs built here without MPI, llm.c's
#                             train_gpt2.cu for sm_90 and the plan's figures of the benchmark models, for
#                             a GPU machine to run the check on without building (tests/gpu/bundle.sh)
# NVCC, CUDA_HOME and NCCL_HOME may be set on the command line; MPI is used where mpicc is found.

NVCC ?= $(firstword $(shell command -v nvcc 2>/dev/null) $(wildcard /usr/local/cuda/bin/nvcc))

REPORT_DIR ?= docs
gpu-check:
	@REPORT_DIR='$(REPORT_DIR)' sh tests/gpu/run.sh

ifneq ($(NVCC),)
CUDA_HOME   ?= $(patsubst %/bin/nvcc,%,$(NVCC))
CUDA_LIBDIR ?= $(patsubst %/,%,$(dir $(firstword $(wildcard $(CUDA_HOME)/lib64/libcudart.so* \
               $(CUDA_HOME)/lib/libcudart.so* $(CUDA_HOME)/targets/*/lib/libcudart.so*))))
# A library of the toolkit by its file (libX.so, else libX.so.N: some installs have no unversioned name).
cuda_lib     = $(firstword $(wildcard $(CUDA_LIBDIR)/lib$(1).so $(CUDA_LIBDIR)/lib$(1).so.[0-9]*) -l$(1))
NCCL_HOME   ?= $(CUDA_HOME)
NCCL_INCDIR := $(patsubst %/nccl.h,%,$(firstword $(wildcard $(NCCL_HOME)/include/nccl.h $(CUDA_HOME)/include/nccl.h \
               /usr/include/nccl.h)))
NCCL_LIBDIR := $(patsubst %/,%,$(dir $(firstword $(wildcard $(NCCL_HOME)/lib/libnccl.so.2 $(NCCL_HOME)/lib64/libnccl.so.2 \
               $(CUDA_LIBDIR)/libnccl.so.2 /usr/lib/$(MULTIARCH)/libnccl.so.2))))
CUDA_NCCL   := $(and $(NCCL_INCDIR),$(NCCL_LIBDIR))
# cuDNN's headers (its library is opened at run time, never linked): without them attention runs plait's
# kernels alone (without_cudnn.c).
CUDNN_INCDIR := $(patsubst %/cudnn_graph.h,%,$(firstword $(wildcard $(CUDA_HOME)/include/cudnn_graph.h \
                /usr/include/cudnn_graph.h /usr/include/$(MULTIARCH)/cudnn_graph.h)))
CUDNN_C      := attention_path cudnn_library cudnn_sdpa

# Kernels for Hopper (sm_90) with PTX beside them; warnings are errors, as for C (the GPU check, built
# by whatever compilers a GPU machine has, sets WARN and NVCC_WERROR so that new warnings do not stop it).
# The machine code is compressed in the object too, not only the PTX: the line tables of attention.cu's
# unrolled kernels take 6 MB uncompressed, in every program that links the runtime.
NVCC_WERROR ?= -Werror all-warnings
NVCC_FLAGS := -std=c++17 -O3 -lineinfo -D_GNU_SOURCE -DPLAIT_CUDA -gencode arch=compute_90,code=sm_90 \
              -gencode arch=compute_90,code=compute_90 -Xfatbin=-compress-all -Xcompiler -Wall,-Wextra \
              $(NVCC_WERROR) -Iruntime -Iruntime/cuda -MMD -MP
CUDA_CFLAGS := $(CFLAGS) -fopenmp -DPLAIT_CUDA -Iruntime -Iruntime/cuda -I$(CUDA_HOME)/include \
               $(if $(CUDNN_INCDIR),-I$(CUDNN_INCDIR)) -DPLAIT_CUDA_LIBDIR='"$(CUDA_LIBDIR)"' \
               $(if $(CUDA_NCCL),-I$(NCCL_INCDIR)) $(if $(MPI_INC),-DPLAIT_MPI $(MPI_INC))
# How a generated program is compiled and linked against the CUDA runtime (also by `plait build --backend cuda`).
CUDA_CC      := $(if $(MPI_LIB),mpicc,$(CC))
PROGRAM_CFLAGS := -std=c11 $(OPT) $(WARN) -D_GNU_SOURCE -fopenmp -DPLAIT_CUDA -I$(CUDA_HOME)/include
comma        := ,
NCCL_LINK    := $(if $(CUDA_NCCL),-Wl$(comma)-rpath$(comma)$(NCCL_LIBDIR) $(NCCL_LIBDIR)/libnccl.so.2)
CUDA_LINK    := -Wl,--disable-new-dtags -Wl,-rpath,$(CUDA_LIBDIR) $(call cuda_lib,cudart) $(call cuda_lib,cublasLt) $(call cuda_lib,nvrtc) \
                $(NCCL_LINK) $(MPI_LIB) -fopenmp -lpthread -lstdc++ -lm -ldl
CUDA_BUILD_DEFS := -DPLAIT_CUDA_CC='"$(CUDA_CC)"' -DPLAIT_CUDA_CFLAGS='"$(PROGRAM_CFLAGS)"' \
                   -DPLAIT_CUDA_LINK='"$(strip $(CUDA_LINK))"'

# ---- build/libplait_rt_cuda.a -------------------------------------------------------------------
RT_CUDA_C   := $(filter-out runtime/comm_mpi.c,$(RT_SHARED_C)) \
               $(filter-out runtime/cuda/$(if $(CUDA_NCCL),without_nccl,comm_nccl).c \
                 $(if $(CUDNN_INCDIR),runtime/cuda/without_cudnn.c,$(CUDNN_C:%=runtime/cuda/%.c)), \
                 $(wildcard runtime/cuda/*.c))
RT_CUDA_CU  := $(wildcard runtime/cuda/*.cu)
RT_CUDA_OBJ := $(RT_CUDA_C:runtime/%.c=$(B)/rtcuda/%.o) $(RT_CUDA_CU:runtime/cuda/%.cu=$(B)/rtcuda/cuda/%.cu.o) \
               $(B)/rtcuda/cuda_prelude.o

$(B)/libplait_rt_cuda.a: $(RT_CUDA_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(B)/rtcuda/%.o: runtime/%.c
	@mkdir -p $(@D)
	$(CC) $(CUDA_CFLAGS) -c -o $@ $<
$(B)/rtcuda/cuda/%.cu.o: runtime/cuda/%.cu
	@mkdir -p $(@D)
	$(NVCC) $(NVCC_FLAGS) -c -o $@ $<

# The prelude NVRTC compiles in front of the fused kernels, and philox.h that it includes, carried
# inside the library as byte arrays.
$(B)/gen/cuda_prelude.c: runtime/cuda/prelude.cuh runtime/philox.h
	@mkdir -p $(@D)
	@{ echo '/* cuda_prelude.c: the NVRTC prelude and philox.h as text (generated by the Makefile). */'; \
	   echo 'const char gpu_prelude_text[] = {'; od -An -v -tx1 runtime/cuda/prelude.cuh | sed 's/ *\([0-9a-f][0-9a-f]\)/0x\1,/g'; \
	   echo '0};'; echo 'const char gpu_philox_text[] = {'; od -An -v -tx1 runtime/philox.h | sed 's/ *\([0-9a-f][0-9a-f]\)/0x\1,/g'; \
	   echo '0};'; } > $@
$(B)/rtcuda/cuda_prelude.o: $(B)/gen/cuda_prelude.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c -o $@ $<

# ---- build/libplait_rt_ref.a: the CPU reference of the GPU check -------------------------------
RT_REF_C   := $(filter-out runtime/comm_mpi.c,$(RT_C)) tests/gpu/without_mpi.c
RT_REF_OBJ := $(RT_REF_C:%.c=$(B)/rtref/%.o)

$(B)/libplait_rt_ref.a: $(RT_REF_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(B)/rtref/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -fopenmp -DPLAIT_PLAIN_GEMM -Iruntime -Iruntime/cpu -c -o $@ $<

# ---- the programs of the GPU check, from checked-in generated sources (no plait needed there) ----
# build/gpu/NAME/train: NAME's program for the GPU; build/gpu/NAME/train-cpu: the same on the reference.
GPU_MODELS := generated/tiny generated/tiny-tp2-pp2-vpp2 $(wildcard tests/gpu/generated/*)
define gpu_program
$(B)/gpu/$(notdir $(1))/train: $(1)/model.c $(1)/fused_cuda.c $(1)/fused.h \
  $(B)/libplait_rt_cuda.a
	@mkdir -p $$(@D)
	$(CUDA_CC) $(PROGRAM_CFLAGS) -Iruntime -Iruntime/cuda -I$(1) -o $$@ $(1)/model.c \
	  $(1)/fused_cuda.c $(B)/libplait_rt_cuda.a $(CUDA_LINK)
$(B)/gpu/$(notdir $(1))/train-cpu: $(1)/model.c $(1)/fused.c $(1)/fused.h $(B)/libplait_rt_ref.a
	@mkdir -p $$(@D)
	$(CC) -std=c11 $(OPT) $(WARN) -D_GNU_SOURCE -fopenmp -Iruntime -Iruntime/cpu -I$(1) -o $$@ $(1)/model.c \
	  $(1)/fused.c $(B)/libplait_rt_ref.a -lpthread -lm
endef
$(foreach m,$(GPU_MODELS),$(eval $(call gpu_program,$(m))))
GPU_TRAIN := $(foreach m,$(GPU_MODELS),$(B)/gpu/$(notdir $(m))/train) $(B)/gpu/tiny/train-cpu \
             $(B)/gpu/tiny-dropout/train-cpu $(B)/gpu/moe/train-cpu

# Every kernel against the CPU's: one source, built for each side.
$(B)/gpu/kernel_check-cpu: tests/gpu/kernel_check.c $(B)/libplait_rt_ref.a
	@mkdir -p $(@D)
	$(CC) -std=c11 $(OPT) $(WARN) -D_GNU_SOURCE -fopenmp -Iruntime -Iruntime/cpu -o $@ $< $(B)/libplait_rt_ref.a -lm
$(B)/gpu/kernel_check-cuda: tests/gpu/kernel_check.c $(B)/libplait_rt_cuda.a
	@mkdir -p $(@D)
	$(CUDA_CC) $(PROGRAM_CFLAGS) -Iruntime -Iruntime/cuda -o $@ $< $(B)/libplait_rt_cuda.a $(CUDA_LINK)
$(B)/gpu/attention_bench: tests/gpu/attention_bench.c $(B)/libplait_rt_cuda.a
	@mkdir -p $(@D)
	$(CUDA_CC) $(PROGRAM_CFLAGS) -Iruntime -Iruntime/cuda -o $@ $< $(B)/libplait_rt_cuda.a $(CUDA_LINK)
$(B)/gpu/copy_rate: tests/gpu/copy_rate.c $(B)/libplait_rt_cuda.a
	@mkdir -p $(@D)
	$(CUDA_CC) $(PROGRAM_CFLAGS) -Iruntime -Iruntime/cuda -o $@ $< $(B)/libplait_rt_cuda.a $(CUDA_LINK)
$(B)/gpu/tokens: tests/gpu/tokens.c runtime/train/data.h
	@mkdir -p $(@D)
	$(CC) -std=c11 $(OPT) $(WARN) -D_GNU_SOURCE -Iruntime -o $@ $<
GPU_CHECK_BIN := $(GPU_TRAIN) $(B)/gpu/kernel_check-cpu $(B)/gpu/kernel_check-cuda $(B)/gpu/tokens \
                 $(B)/gpu/attention_bench $(B)/gpu/copy_rate

# ---- the checks without a GPU --------------------------------------------------------------------
$(B)/tests/cuda/nvrtc_check: tests/gpu/nvrtc_check.c $(B)/libplait_rt_cuda.a
	@mkdir -p $(@D)
	$(CC) $(PROGRAM_CFLAGS) -Iruntime -Iruntime/cuda -o $@ $< $(B)/libplait_rt_cuda.a $(CUDA_LINK)

# cuDNN's loader and graphs without a GPU (tests/cli/cuda.sh), where its headers are here.
$(B)/tests/cuda/cudnn_check: tests/gpu/cudnn_check.c $(B)/libplait_rt_cuda.a
	@mkdir -p $(@D)
	$(CC) $(PROGRAM_CFLAGS) -I$(CUDNN_INCDIR) -Iruntime -Iruntime/cuda -o $@ $< $(B)/libplait_rt_cuda.a $(CUDA_LINK)
CUDNN_CHECK := $(if $(CUDNN_INCDIR),$(B)/tests/cuda/cudnn_check)

gpu-programs: $(GPU_CHECK_BIN)

# The programs again in a tree of their own, without MPI (a GPU machine has none), then the bundle.
LLMC ?= ../shared/peers/llm.c
gpu-bundle: $(B)/plait
	$(MAKE) B=$(B)/gpu-bundle-objects MPI_INC= MPI_LIB= gpu-programs
	sh tests/gpu/bundle.sh $(B)/gpu-bundle-objects $(B)/gpu-bundle '$(LLMC)' '$(NVCC)'
all: $(B)/libplait_rt_cuda.a
test: $(B)/tests/cuda/nvrtc_check $(CUDNN_CHECK) $(GPU_CHECK_BIN)

# attention.cu's tiled kernels on the CPU, a fiber a thread, against the CPU reference
# (tests/gpu/attention_emulation; a minute or more, not part of `make test`). The kernels are
# attention.cu cut from its tiles to the plain kernels, without gpu.h and the PTX wrappers that
# emu.h stands in for.
EMU_SRC := tests/gpu/attention_emulation
$(B)/attention_emulation/attention_tiles.inc: runtime/cuda/attention.cu
	@mkdir -p $(@D)
	sed -e '/^#include "gpu.h"/d' \
	    -e '/---- tensor cores and asynchronous/,/---- tiles in shared/{/---- tiles in shared/!d;}' \
	    -e '/---- heads the tiles do not take/,$$d' $< > $@
$(B)/attention_emulation/emu: $(EMU_SRC)/main.cpp $(EMU_SRC)/emu.cpp $(EMU_SRC)/emu.h \
                              $(B)/attention_emulation/attention_tiles.inc $(B)/libplait_rt_ref.a
	$(CXX) -std=c++17 -O2 -g -Wall -Wextra -Werror -Wno-unknown-pragmas -I$(B)/attention_emulation \
	  -Iruntime -Iruntime/cpu -include $(EMU_SRC)/emu.h -o $@ $(EMU_SRC)/main.cpp $(EMU_SRC)/emu.cpp \
	  $(B)/libplait_rt_ref.a -fopenmp -lm -lpthread
attention-emulation: $(B)/attention_emulation/emu
	$<
.PHONY: gpu-check gpu-programs gpu-bundle attention-emulation
endif
