// emu.cc: cuda/gpt.cu compiled for the host (emu.h), under the names of api.h.
// gpt_cu.h is a link to ../gpt.cu: go's build cache hashes the files in a
// package's directory, so through the link an edit of gpt.cu rebuilds this.
#define TRG_EMULATE 1
#include "api.h"
#include "gpt_cu.h"
