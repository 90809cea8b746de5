# Makefile: builds the plait compiler (build/plait), the runtime libraries generated programs link with,
# and the tests. `make demo` is the main job, `make test` runs every test, `make bench` the benchmarks.

# The Debian packages plait needs are installed (or named) before anything else is read: the flags
# below ask mpicc and the compiler, which a fresh machine gets only from this step. The GPU check's
# targets skip it: a GPU machine has nvcc and CUDA's libraries and no package registry.
ifeq ($(filter clean gpu-check gpu-programs,$(MAKECMDGOALS)),)
ifneq ($(shell ./.ci/deps >&2 && echo ok),ok)
$(error the deps step failed: install the packages it names, then run make again)
endif
endif

# Every core builds (a -j on the command line still decides): `make test` compiles four CPU runtimes,
# the GPU runtime and its programs before it tests.
MAKEFLAGS += -j$(shell nproc)

CC       ?= cc
OPT      ?= -O2
WARN     := -Wall -Wextra -Werror
CFLAGS   := -std=c11 $(OPT) -g $(WARN) -D_GNU_SOURCE -MMD -MP
MULTIARCH:= $(shell $(CC) -print-multiarch)
LUA_INC  := -I/usr/include/lua5.4
LUA_LIB  := /usr/lib/$(MULTIARCH)/liblua5.4.a
MPI_INC  := $(shell mpicc --showme:compile 2>/dev/null)
MPI_LIB  := $(shell mpicc --showme:link 2>/dev/null)
# OpenBLAS's OpenMP build, linked statically: its threads and the kernels' are one OpenMP pool (the
# pthread build's threads spin against OpenMP's on a small machine).
OPENBLAS := /usr/lib/$(MULTIARCH)/openblas-openmp/libopenblas.a
RT_LIBS  := $(OPENBLAS) $(MPI_LIB) -fopenmp -lpthread -lm
# PCRE2 (its JIT) runs the tokenizer's pre-tokenizer in plait data and utf8proc its normalizer;
# training programs never link them.
TEXT_LIBS := $(shell pkg-config --libs libpcre2-8) -lutf8proc

B := build

# ---- the compiler -------------------------------------------------------------------------------
# Its groups, in the order a model goes through them (docs/design.md draws the map):
#   compiler/          main.c, the commands (cmd_*.c), their options and their output files
#   compiler/front/    the Lua host: the language's core, layers, families, the layout's fields
#   compiler/ir/       the graph, elementwise expressions, shapes, diagnostics
#   compiler/passes/   tensor-parallel sharding, autodiff, fusion, the memory plan
#   compiler/cost/     machines, calibration, the kernels' and stages' time, FLOPs and bytes
#   compiler/schedule/ pipeline schedules: made, read, written, lowered, validated, simulated
#   compiler/plan/     the plan and its printers (text, JSON, DOT, SVG, trace), and tune
#   compiler/emit/     the generated program: its stages, names, sizes, fused kernels and plan
COMPILER_GROUPS := front ir passes cost schedule plan emit
COMPILER_C   := $(filter-out compiler/main.c,$(wildcard compiler/*.c)) \
                $(foreach g,$(COMPILER_GROUPS),$(wildcard compiler/$(g)/*.c))
COMPILER_RE  := $(wildcard compiler/schedule/*.re)
# The runtime files the compiler links: plait import and export read and write checkpoints with the
# runtime's own reader and writer, in double; plans print memory with the runtime's byte formatter;
# plait build writes constants.bin with the writer DIR/train reads it with.
COMPILER_RT  := bytes constants_file ckpt/safetensors ckpt/safetensors_hash \
                ckpt/safetensors_header ckpt/safetensors_meta ckpt/safetensors_model escape half \
                infile mapped own_folder write_place text/json text/tokenizer text/tokenizer_json \
                text/utf8
COMPILER_OBJ := $(COMPILER_C:compiler/%.c=$(B)/compiler/%.o) $(COMPILER_RE:compiler/%.re=$(B)/compiler/%.o) \
                $(B)/compiler/lualib.o $(COMPILER_RT:%=$(B)/compiler/rt/%.o)
LUA_SOURCES  := $(wildcard lib/plait/*.lua lib/plait/machines/*.lua)
# Its switches over an enum (op kinds, elementwise ops) name every enumerator and have no default: an
# op a pass does not handle is a build error (tests/cli/exhaustive_ops.sh checks that it stays one).
COMPILER_WARN := -Wswitch-enum

# ---- the runtime (CPU; fp32 for programs, fp64 for gradient checks) -----------------------------
# runtime/ runs a plan (ranks, collectives, the kernels' interface, the headers generated programs
# include); ckpt/ the safetensors format and text/ the tokenizer's reading and decoding (both
# linked by the compiler too); train/ DIR/train's main, its loop, flags, data and files; cpu/ and
# cuda/ the kernels.
RT_SHARED_C := $(wildcard runtime/*.c runtime/ckpt/*.c runtime/text/*.c runtime/train/*.c)
RT_C     := $(RT_SHARED_C) $(wildcard runtime/cpu/*.c)
RT32_OBJ := $(RT_C:runtime/%.c=$(B)/rt32/%.o)
RT64_OBJ := $(RT_C:runtime/%.c=$(B)/rt64/%.o)
# The same with only the kernels' baseline x86-64 path (programs built under PLAIT_CPU=baseline; tests).
RT32B_OBJ := $(RT_C:runtime/%.c=$(B)/rt32b/%.o)
RT64B_OBJ := $(RT_C:runtime/%.c=$(B)/rt64b/%.o)
# -fno-math-errno: sqrt is inlined and vectorised (errno is never read; the values are the same).
RT_CFLAGS := $(CFLAGS) -fno-math-errno -fopenmp $(MPI_INC) -Iruntime -Iruntime/cpu

# ---- tests --------------------------------------------------------------------------------------
UNIT_C   := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_C:tests/unit/%.c=$(B)/tests/%)
TOOL_C   := $(wildcard tests/tools/*.c)
TOOL_BIN := $(TOOL_C:tests/tools/%.c=$(B)/tools/%)

.PHONY: all test demo bench clean fuzz interop-check baseline
all: $(B)/plait $(B)/libplait_rt.a $(B)/libplait_rt64.a $(B)/plait-probe

$(B)/plait: $(B)/compiler/main.o $(B)/libplaitc.a
	$(CC) $(CFLAGS) -o $@ $^ $(LUA_LIB) $(TEXT_LIBS) -lpthread -lm -ldl

$(B)/libplaitc.a: $(COMPILER_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(B)/compiler/%.o: compiler/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(COMPILER_WARN) $(LUA_INC) -Icompiler -Iruntime -DPLAIT_REAL_DOUBLE -DOPENBLAS='"$(OPENBLAS)"' $(CUDA_BUILD_DEFS) -c -o $@ $<

$(B)/compiler/rt/%.o: runtime/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -DPLAIT_REAL_DOUBLE -Iruntime -c -o $@ $<

$(B)/gen/%.c: compiler/%.re
	@mkdir -p $(@D)
	re2c -W --no-generation-date -o $@ $<

$(B)/compiler/%.o: $(B)/gen/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(COMPILER_WARN) $(LUA_INC) -Icompiler -Iruntime -c -o $@ $<

# lib/plait/*.lua carried inside the binary: one byte array per module ("init" is the module "plait"; the
# built-in machine files lib/plait/machines/NAME.lua are the modules plait.machines.NAME).
$(B)/gen/lualib.c: $(LUA_SOURCES) Makefile
	@mkdir -p $(@D)
	@{ echo '/* lualib.c: lib/plait carried inside the plait binary (generated by the Makefile). */'; \
	   echo '#include "front/lualib.h"'; \
	   for f in $(LUA_SOURCES); do n=$$(echo $$f | sed 's|^lib/plait/||; s|\.lua$$||; s|/|_|g'); \
	     echo "static const char src_$$n[] = {"; od -An -v -tx1 $$f | sed 's/ *\([0-9a-f][0-9a-f]\)/0x\1,/g'; echo '0};'; done; \
	   echo 'const LuaSource plait_lua_sources[] = {'; \
	   for f in $(LUA_SOURCES); do n=$$(echo $$f | sed 's|^lib/plait/||; s|\.lua$$||; s|/|_|g'); \
	     m=plait.$$(echo $$f | sed 's|^lib/plait/||; s|\.lua$$||; s|/|.|g'); [ $$n = init ] && m=plait; \
	     echo "  {\"$$m\", \"$$f\", src_$$n, sizeof src_$$n - 1},"; done; \
	   echo '  {0, 0, 0, 0}};'; } > $@

$(B)/compiler/lualib.o: $(B)/gen/lualib.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Icompiler -c -o $@ $<

# ---- runtime libraries --------------------------------------------------------------------------
$(B)/libplait_rt.a: $(RT32_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(B)/libplait_rt64.a: $(RT64_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(B)/rt32/%.o: runtime/%.c
	@mkdir -p $(@D)
	$(CC) $(RT_CFLAGS) -c -o $@ $<
$(B)/rt64/%.o: runtime/%.c
	@mkdir -p $(@D)
	$(CC) $(RT_CFLAGS) -DPLAIT_REAL_DOUBLE -c -o $@ $<
$(B)/libplait_rt_baseline.a: $(RT32B_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(B)/libplait_rt64_baseline.a: $(RT64B_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(B)/rt32b/%.o: runtime/%.c
	@mkdir -p $(@D)
	$(CC) $(RT_CFLAGS) -DPLAIT_CPU_BASELINE -c -o $@ $<
$(B)/rt64b/%.o: runtime/%.c
	@mkdir -p $(@D)
	$(CC) $(RT_CFLAGS) -DPLAIT_CPU_BASELINE -DPLAIT_REAL_DOUBLE -c -o $@ $<
baseline: $(B)/libplait_rt_baseline.a $(B)/libplait_rt64_baseline.a

# What `plait calibrate` runs: this machine measured through the runtime (fp32, as generated programs).
$(B)/plait-probe: runtime/probe/probe.c $(B)/libplait_rt.a
	$(CC) $(CFLAGS) -fopenmp $(MPI_INC) -Iruntime -Iruntime/cpu -o $@ $< $(B)/libplait_rt.a $(RT_LIBS)

# ---- tests: unit binaries link the compiler and the fp64 runtime; tests/run.sh runs everything ---
$(B)/tests/%: tests/unit/%.c tests/unit/check.h $(B)/libplaitc.a $(B)/libplait_rt64.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -fopenmp $(LUA_INC) $(MPI_INC) -DPLAIT_REAL_DOUBLE -Icompiler -Iruntime -Iruntime/cpu -Itests/unit \
	  -o $@ $< $(B)/libplaitc.a $(B)/libplait_rt64.a $(LUA_LIB) $(TEXT_LIBS) $(RT_LIBS) -ldl

# Programs the command-line tests use (fp32 runtime, as generated programs).
$(B)/tools/%: tests/tools/%.c $(B)/libplait_rt.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -fopenmp $(MPI_INC) -Iruntime -o $@ $< $(B)/libplait_rt.a $(RT_LIBS)

# The attention kernels' time on GPT-2's shape and longer sequences (make bench; not part of test).
$(B)/tools/attention_bench: tests/bench/attention_bench.c $(B)/libplait_rt.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -fopenmp $(MPI_INC) -Iruntime -o $@ $< $(B)/libplait_rt.a $(RT_LIBS)

test: all baseline $(UNIT_BIN) $(TOOL_BIN)
	@sh tests/run.sh $(B)

# The main job: the tiny byte-level GPT trained on the fortunes of Debian's fortunes package for a few
# minutes, then a sample of what it learned.
demo: all
	@mkdir -p $(B)/demo
	$(B)/plait plan models/tiny.lua --machine cpu | sed -n '1,/^schedule/p' | sed '$$d'
	$(B)/plait build models/tiny.lua -o $(B)/demo/tiny
	$(B)/plait data --bytes $$(ls /usr/share/games/fortunes/* | grep -v -e '\.dat$$' -e '\.u8$$') -o $(B)/demo/fortunes.bin
	$(B)/demo/tiny/train --data $(B)/demo/fortunes.bin --steps 1500 --lr 3e-3 --warmup 50 --eval-every 250 \
	  --sample 400 --log-json $(B)/demo/log.json
	$(B)/plait plot $(B)/demo/log.json -o $(B)/demo/curve.svg

# ---- fuzzing: the schedule readers under libFuzzer (clang); `make fuzz FUZZ_SECONDS=N` -----------
FUZZ_SECONDS ?= 180
FUZZ_SRC := tests/fuzz/fuzz_schedule_read.c $(B)/gen/schedule/schedule_read.c \
            $(addprefix compiler/schedule/,schedule.c schedule_csv.c schedule_write.c lower.c validate.c \
            simulate.c) compiler/ir/diag.c runtime/escape.c runtime/infile.c
$(B)/fuzz/fuzz_schedule_read: $(FUZZ_SRC) compiler/schedule/schedule.h compiler/schedule/simulate.h compiler/ir/diag.h runtime/escape.h \
                              runtime/infile.h
	@mkdir -p $(@D)/corpus
	clang -std=c11 -g -O1 -D_GNU_SOURCE -Icompiler -Iruntime -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -o $@ $(FUZZ_SRC)
fuzz: $(B)/fuzz/fuzz_schedule_read
	$< -max_total_time=$(FUZZ_SECONDS) -timeout=10 -print_final_stats=1 $(B)/fuzz/corpus tests/fuzz/corpus

bench: all $(B)/tools/membw $(B)/tools/llmc_checkpoint $(B)/tools/attention_bench
	@sh tests/bench/bench.sh

# plait against transformers on the same weights and tokens: import, --eval, one step's gradients, export
# and plait data --tokenizer against Hugging Face tokenizers on the machine's text (needs pip install
# torch transformers safetensors tokenizers; says so and passes without them; not part of test).
interop-check: all $(B)/tools/mlm_batch $(B)/tools/decode_tokens
	@python3 tests/interop/check.py $(B)
	@python3 tests/interop/tokenizers_check.py $(B)
	@python3 tests/interop/hf_defaults.py

clean:
	rm -rf $(B)

# ---- CUDA (where nvcc is found): the GPU runtime, its checks in `make test`, and `make gpu-check` --
include runtime/cuda/cuda.mk

-include $(wildcard $(B)/*/*.d $(B)/*/*/*.d $(B)/*/*/*/*.d)
