# tests/programs/torch.mk — the C program standing in for PyTorch's NVTX operator ranges on the CUDA
# stand-in (tests/test_torch.py); the real PyTorch loops are the torch_*.py beside it.
PROGRAMS_TORCH := $(PROG_OUT)/torch_ops_c

$(PROG_OUT)/torch_ops_c: $(PROG_SRC)/torch_ops_c.c $(PROG_DEPS)
	@mkdir -p $(@D)
	$(CC) $(PROG_CFLAGS) -o $@ $< $(PROG_CUDA_LIBS) -ldl
