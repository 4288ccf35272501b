/* infer_args.c - the inference program's command line: its flag table (parsed by
 * cli_flags.c), the binding of files to inputs and outputs, the output naming scheme, and
 * --help. Only --input and --output may be repeated (once per name); any other flag given
 * twice is a usage error, and so is a flag where a value belongs (`--output --metric`). */
#define _POSIX_C_SOURCE 200809L

#include "infer_internal.h"
#include "rt_internal.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { F_BOOL = CANNL__FLAG_SWITCH, F_INT, F_PATH, F_INPUT, F_OUTPUT, F_TEXT, F_REAL } flag_kind;
enum { ONCE = CANNL__FLAG_ONCE, MANY = CANNL__FLAG_REPEAT };

static const cannl__flag FLAGS[] = {
    {"--weights", F_PATH, ONCE, 0, "PATH", "params from a safetensors file (a checkpoint of this model, or any file with the params)"},
    {"--name-map", F_PATH, ONCE, 0, "FILE", "tensor names in the --weights file: lines 'cannl_name = pytorch.key' (# comments)"},
    {"--input", F_INPUT, MANY, 0, "NAME=PATH", "data for input NAME (one per input; .npy, .csv, IDX, maybe .gz)"},
    {"--data", F_INPUT, MANY, 0, "NAME=PATH", "the same as --input (the training program's spelling)"},
    {"--output", F_OUTPUT, MANY, 0, "PATH", "write the outputs: CSV if PATH ends in .csv, else .npy (several: see below)"},
    {"--batch", F_INT, ONCE, 1, "N", "examples per forward call (default 128, or the model's maximum if smaller); with --prompts, lines at once (default 8)"},
    {"--threads", F_INT, ONCE, 1, "N", "OpenMP threads"},
    {"--metric", F_BOOL, ONCE, 0, NULL, "evaluate the loss and the metrics (needs every input, targets too)"},
    {"--generate", F_INT, ONCE, 0, "N", "sample N tokens after --prompt and write them to stdout (language models; see below)"},
    {"--prompt", F_TEXT, ONCE, 0, "TEXT", "the text generation starts from (bytes, or whitespace-separated ids)"},
    {"--prompts", F_PATH, ONCE, 0, "FILE", "one prompt per line of FILE, generated for in batches (see below)"},
    {"--temperature", F_REAL, ONCE, 0, "T", "sampling temperature (default 1; 0: always the most likely token)"},
    {"--top-k", F_INT, ONCE, 1, "K", "sample among the K most likely tokens only (default: all)"},
    {"--seed", F_INT, ONCE, 0, "S", "seed of the sampling (default 0; the same seed gives the same text)"},
    {"--help", F_BOOL, ONCE, 0, NULL, "show this help"},
};
enum { NFLAGS = sizeof FLAGS / sizeof FLAGS[0] };

static int flag_index(const char *name) {
    for (int k = 0; k < NFLAGS; k++)
        if (strcmp(FLAGS[k].name, name) == 0) return k;
    return 0;
}

static int find(const cannl_tensor_info *t, int32_t n, const char *name, size_t len) {
    for (int32_t i = 0; i < n; i++)
        if (strlen(t[i].name) == len && strncmp(t[i].name, name, len) == 0) return (int)i;
    return -1;
}

/* "image, label" */
/* s[0, len) is a spec name ([A-Za-z_][A-Za-z0-9_]*): NAME=PATH, not a path with '=' in it. */
static int is_identifier(const char *s, size_t len) {
    if (len == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_')) return 0;
    for (size_t i = 1; i < len; i++)
        if (!(isalnum((unsigned char)s[i]) || s[i] == '_')) return 0;
    return 1;
}

static void name_list(const cannl_tensor_info *t, int32_t n, char *buf, size_t cap) {
    size_t k = 0;
    buf[0] = '\0';
    for (int32_t i = 0; i < n && k < cap; i++) k += (size_t)snprintf(buf + k, cap - k, "%s%s", i ? ", " : "", t[i].name);
}

/* What apply stores into, and checks against. */
typedef struct parse_ctx {
    const cannl_model_api *api;
    cannl__infer_opts *o;
} parse_ctx;

/* Store one flag's value into the options. */
static int apply(void *ctx, const cannl__flag *f, const char *v, char *msg, size_t cap) {
    const cannl_model_api *api = ((parse_ctx *)ctx)->api;
    cannl__infer_opts *o = ((parse_ctx *)ctx)->o;
    const char *n = f->name;
    if (f->kind == F_INPUT && api->num_inputs == 0) return cannl__usage_error(msg, cap, "model '%s' has no inputs", api->name);
    if (f->kind == F_BOOL) {
        if (strcmp(n, "--metric") == 0) o->metric = 1;
        if (strcmp(n, "--help") == 0) o->help = 1;
    } else if (f->kind == F_INPUT) {
        const char *eq = strchr(v, '=');
        if (!eq || eq == v || !eq[1]) return cannl__usage_error(msg, cap, "--input expects NAME=PATH, got '%s'", v);
        o->inputs[o->ninputs++] = (cannl__binding){v, (size_t)(eq - v), eq + 1};
    } else if (f->kind == F_OUTPUT) {
        if (!*v) return cannl__usage_error(msg, cap, "--output: empty path");
        const char *eq = strchr(v, '=');
        int k = eq ? find(api->outputs, api->num_outputs, v, (size_t)(eq - v)) : -1;
        if (k >= 0) {
            if (!eq[1]) return cannl__usage_error(msg, cap, "--output %s=: empty path", api->outputs[k].name);
            if (o->out_paths[k])
                return cannl__usage_error(msg, cap, "--output %s given twice (%s and %s)", api->outputs[k].name, o->out_paths[k],
                            eq + 1);
            o->out_paths[k] = eq + 1;
        } else if (eq && is_identifier(v, (size_t)(eq - v))) {
            char names[256];
            name_list(api->outputs, api->num_outputs, names, sizeof names);
            return cannl__usage_error(msg, cap, "--output %s: the model has no output '%.*s' (outputs: %s; write ./%s for "
                                      "a file of that name)", v, (int)(eq - v), v, names, v);
        } else {
            if (o->out_scheme) return cannl__usage_error(msg, cap, "--output PATH given twice (%s and %s)", o->out_scheme, v);
            o->out_scheme = v;
        }
    } else if (f->kind == F_TEXT) {
        o->prompt = v;
    } else if (f->kind == F_REAL) {
        double x;
        cannl__num st = cannl__parse_decimal(v, &x);
        if (st != CANNL__NUM_OK || x < 0)
            return cannl__usage_error(msg, cap, "%s expects a number >= 0, got '%s'", n, v);
        o->temperature = x;
    } else if (f->kind == F_PATH) {
        if (!*v) return cannl__usage_error(msg, cap, "%s: empty path", n);
        if (strcmp(n, "--name-map") == 0)
            o->name_map = v;
        else if (strcmp(n, "--prompts") == 0)
            o->prompts = v;
        else
            o->weights = v;
    } else if (f->kind == F_INT && strcmp(n, "--seed") == 0) {
        return cannl__parse_u64(n, v, &o->seed, msg, cap); /* any uint64, as the training program's --seed */
    } else if (f->kind == F_INT) {
        int64_t x;
        const int64_t max = strcmp(n, "--generate") == 0  ? CANNL__MAX_GENERATE
                            : strcmp(n, "--threads") == 0 ? CANNL__MAX_THREADS
                                                          : CANNL__MAX_COUNT;
        int rc = cannl__parse_int(n, v, f->min, max, &x, msg, cap);
        if (rc != CANNL__EXIT_OK) return rc;
        if (strcmp(n, "--batch") == 0) {
            o->batch = (int64_t)x;
            o->batch_set = 1;
        } else if (strcmp(n, "--generate") == 0) {
            o->generate = x;
            o->generate_set = 1;
        } else if (strcmp(n, "--top-k") == 0) {
            o->top_k = x;
        } else {
            o->threads = (int)x;
        }
    }
    return CANNL__EXIT_OK;
}

/* --generate: no --input, --output or --metric; a prompt; a model with exactly one input
   forward reads, integer ids [ctx], whose first output is [ctx, n] logits with n <= ids. */
static int generate_checks(const cannl_infer_model *model, cannl__infer_opts *o, char *msg, size_t cap) {
    const cannl_model_api *api = model->api;
    if (o->ninputs > 0 || o->out_scheme || o->metric)
        return cannl__usage_error(msg, cap, "--generate writes text to stdout: it takes no --input, --output or --metric");
    for (int32_t k = 0; k < api->num_outputs; k++)
        if (o->out_paths[k])
            return cannl__usage_error(msg, cap, "--generate writes text to stdout: it takes no --input, --output or --metric");
    if (o->batch_set && !o->prompts)
        return cannl__usage_error(msg, cap, "--generate --prompt runs one sequence: --batch goes with --prompts");
    if (o->batch_set && o->batch > api->max_batch)
        return cannl__usage_error(msg, cap, "--batch %" PRId64 " is larger than the model's maximum batch %" PRId64,
                                  o->batch, api->max_batch);
    if (o->prompt && o->prompts) return cannl__usage_error(msg, cap, "--prompt and --prompts: give one of them");
    if (!o->prompt && !o->prompts) return cannl__usage_error(msg, cap, "--generate needs --prompt TEXT or --prompts FILE");
    if (o->prompt && !o->prompt[0]) return cannl__usage_error(msg, cap, "--prompt: empty prompt");
    int32_t in = -1, reads = 0;
    for (int32_t i = 0; i < api->num_inputs; i++)
        if (model->forward_reads[i]) {
            reads++;
            in = i;
        }
    if (reads != 1)
        return cannl__usage_error(msg, cap, "--generate: model '%s' has %d inputs its outputs read; generation needs exactly "
                                  "one, the integer token ids [ctx]", api->name, (int)reads);
    const cannl_tensor_info *t = &api->inputs[in];
    if (t->ids <= 0 || t->ndims != 1)
        return cannl__usage_error(msg, cap, "--generate: input '%s' of model '%s' is not integer token ids [ctx]", t->name,
                                  api->name);
    const cannl_tensor_info *y = api->num_outputs > 0 ? &api->outputs[0] : NULL;
    if (!y || y->ndims != 2 || y->dims[0] != t->dims[0])
        return cannl__usage_error(msg, cap, "--generate: the first output of model '%s' is not [ctx, n] logits (ctx %" PRId64
                                  ", the length of input '%s')", api->name, t->dims[0], t->name);
    if (y->dims[1] > t->ids)
        return cannl__usage_error(msg, cap, "--generate: output '%s' scores %" PRId64 " tokens but input '%s' takes ids below %"
                                  PRId64, y->name, y->dims[1], t->name, t->ids);
    o->gen_input = in;
    return CANNL__EXIT_OK;
}

/* The scheme's path of output k: PATH itself for a model with one output, else PATH with
   its ".npy" or ".csv" replaced by ".NAME.npy" / ".NAME.csv" (no such suffix: PATH.NAME.npy). */
static char *scheme_path(const cannl_model_api *api, const char *scheme, int32_t k) {
    const char *name = api->outputs[k].name;
    size_t len = strlen(scheme);
    const char *ext = ".npy";
    if (cannl__out_format_of(scheme) == CANNL__OUT_CSV || (len >= 4 && strcmp(scheme + len - 4, ".npy") == 0)) {
        len -= 4;
        ext = scheme + len;
    }
    size_t cap = strlen(scheme) + strlen(name) + 8;
    char *p = malloc(cap);
    if (!p) return NULL;
    if (api->num_outputs == 1)
        snprintf(p, cap, "%s", scheme);
    else
        snprintf(p, cap, "%.*s.%s%s", (int)len, scheme, name, ext);
    return p;
}

int cannl__infer_parse(const cannl_infer_model *model, int argc, char **argv, cannl__infer_opts *o, char *msg,
                       size_t cap) {
    const cannl_model_api *api = model->api;
    memset(o, 0, sizeof *o);
    o->prog = cannl__prog_name(argc, argv, "infer");
    o->inputs = calloc((size_t)(argc > 0 ? argc : 1), sizeof *o->inputs);
    o->out_paths = calloc((size_t)api->num_outputs + 1, sizeof *o->out_paths);
    o->derived = calloc((size_t)api->num_outputs + 1, sizeof *o->derived);
    if (!o->inputs || !o->out_paths || !o->derived) return cannl__usage_error(msg, cap, "out of memory");
    o->noutputs = api->num_outputs;
    o->temperature = 1;

    const char *seen[NFLAGS] = {0}; /* the value a flag that takes one only once was given */
    parse_ctx ctx = {api, o};
    int rc = cannl__flags_parse(FLAGS, NFLAGS, argc, argv, seen, apply, &ctx, msg, cap);
    if (rc) return rc;
    if (o->help) return CANNL__EXIT_OK;
    if (o->generate_set) return generate_checks(model, o, msg, cap);
    if (o->prompt || o->prompts || seen[flag_index("--temperature")] || o->top_k || seen[flag_index("--seed")])
        return cannl__usage_error(msg, cap, "--prompt, --prompts, --temperature, --top-k and --seed go with --generate N");
    if (o->name_map && !o->weights)
        return cannl__usage_error(msg, cap, "--name-map names the tensors of a --weights file: pass --weights PATH");

    if (o->batch_set && o->batch > api->max_batch)
        return cannl__usage_error(msg, cap,
                    "--batch %" PRId64 " is larger than the model's maximum batch %" PRId64
                    " (regenerate with cannl gen --max-batch N)",
                    o->batch, api->max_batch);
    if (!o->batch_set) o->batch = CANNL__DEFAULT_BATCH < api->max_batch ? CANNL__DEFAULT_BATCH : api->max_batch;
    int writes = o->out_scheme != NULL;
    for (int32_t k = 0; k < api->num_outputs; k++) writes |= o->out_paths[k] != NULL;
    if (!writes && !o->metric) return cannl__usage_error(msg, cap, "nothing to do: pass --output PATH and/or --metric, or --generate N");
    if (api->num_outputs == 0 && o->out_scheme)
        return cannl__usage_error(msg, cap, "--output %s: model '%s' has no outputs", o->out_scheme, api->name);
    if (o->metric && !api->eval) return cannl__usage_error(msg, cap, "--metric: model '%s' has no eval function", api->name);

    char list[256];
    name_list(api->inputs, api->num_inputs, list, sizeof list);
    for (int b = 0; b < o->ninputs; b++) {
        const cannl__binding *x = &o->inputs[b];
        int i = find(api->inputs, api->num_inputs, x->name, x->name_len);
        if (i < 0)
            return cannl__usage_error(msg, cap, "--input %.*s=...: model '%s' has no input '%.*s' (its inputs: %s)", (int)x->name_len,
                        x->name, api->name, (int)x->name_len, x->name, list);
        for (int c = 0; c < b; c++)
            if (find(api->inputs, api->num_inputs, o->inputs[c].name, o->inputs[c].name_len) == i)
                return cannl__usage_error(msg, cap, "--input %s given twice (%s and %s)", api->inputs[i].name, o->inputs[c].path,
                            x->path);
        if (!o->metric && !model->forward_reads[i])
            return cannl__usage_error(msg, cap,
                        "--input %s=...: the outputs do not depend on input '%s'; it is only read with --metric",
                        api->inputs[i].name, api->inputs[i].name);
    }
    for (int32_t i = 0; i < api->num_inputs; i++) {
        if (!o->metric && !model->forward_reads[i]) continue;
        int given = 0;
        for (int b = 0; b < o->ninputs && !given; b++)
            given = find(api->inputs, api->num_inputs, o->inputs[b].name, o->inputs[b].name_len) == (int)i;
        if (!given)
            return cannl__usage_error(msg, cap, "no data for input '%s'%s: pass --input %s=PATH", api->inputs[i].name,
                        model->forward_reads[i] ? "" : " (--metric needs every input)", api->inputs[i].name);
    }
    if (o->out_scheme)
        for (int32_t k = 0; k < api->num_outputs; k++) {
            if (o->out_paths[k]) continue;
            o->derived[k] = scheme_path(api, o->out_scheme, k);
            if (!o->derived[k]) return cannl__usage_error(msg, cap, "out of memory");
            o->out_paths[k] = o->derived[k];
        }
    for (int32_t k = 0; k < api->num_outputs; k++)
        for (int32_t j = 0; j < k; j++)
            if (o->out_paths[k] && o->out_paths[j] && cannl__same_file(o->out_paths[k], o->out_paths[j]))
                return cannl__usage_error(msg, cap, "--output: outputs '%s' and '%s' would both be written to %s",
                            api->outputs[j].name, api->outputs[k].name, o->out_paths[k]);
    /* An output written over a file the program reads (an input, the weights) is refused. */
    for (int32_t k = 0; k < api->num_outputs; k++) {
        const char *out = o->out_paths[k];
        if (!out) continue;
        char why[64];
        if (!cannl__tmp_replaceable(out, why, sizeof why))
            return cannl__usage_error(msg, cap, "--output %s: it %s (cannl replaces only regular files you own)", out, why);
        for (int b = 0; b < o->ninputs; b++)
            if (cannl__reads_file(o->inputs[b].path, out))
                return cannl__usage_error(msg, cap, "--output %s would overwrite the file of --input %.*s", out,
                                          (int)o->inputs[b].name_len, o->inputs[b].name);
        if ((o->weights && cannl__same_file(o->weights, out)) || (o->name_map && cannl__same_file(o->name_map, out)))
            return cannl__usage_error(msg, cap, "--output %s would overwrite the %s file", out,
                                      o->weights && cannl__same_file(o->weights, out) ? "--weights" : "--name-map");
    }
    return CANNL__EXIT_OK;
}

void cannl__infer_opts_free(cannl__infer_opts *o) {
    if (!o) return;
    if (o->derived)
        for (int32_t k = 0; k < o->noutputs; k++) free(o->derived[k]);
    free(o->derived);
    free(o->inputs);
    free((void *)o->out_paths);
    o->derived = NULL;
    o->inputs = NULL;
    o->out_paths = NULL;
}

void cannl__infer_usage(const cannl_infer_model *model, const char *prog, FILE *out) {
    const cannl_model_api *api = model->api;
    fprintf(out, "usage: %s [flags]\n\nRuns model '%s' forward (%s, batch at most %" PRId64 ") on data files.\n", prog,
            api->name, api->dtype == CANNL_F64 ? "float64" : "float32", api->max_batch);
    fprintf(out, model->embedded || model->create_embedded
                     ? "Its trained params are compiled in (--weights PATH loads others instead).\n"
                     : "Its params come from --weights PATH (none are compiled in).\n");
    fprintf(out, "Inputs (--input NAME=PATH; for an input only --metric reads, a target, a file with one class\n"
                 "index per example is one-hot encoded):\n");
    for (int32_t i = 0; i < api->num_inputs; i++) {
        fprintf(out, "  %-12s ", api->inputs[i].name);
        cannl__print_dims(out, &api->inputs[i]);
        if (api->inputs[i].ids > 0)
            fprintf(out, "  int: %" PRId64 " id%s per example, each in [0, %" PRId64 ")%s\n", api->inputs[i].size,
                    api->inputs[i].size == 1 ? "" : "s", api->inputs[i].ids,
                    model->forward_reads[i] ? "" : "  only for --metric");
        else
            fprintf(out, "  (%" PRId64 " value%s per example)%s\n", api->inputs[i].size,
                    api->inputs[i].size == 1 ? "" : "s", model->forward_reads[i] ? "" : "  only for --metric");
    }
    fprintf(out, "Outputs (written as .npy arrays [examples, dims...], or CSV with one line per example):\n");
    for (int32_t k = 0; k < api->num_outputs; k++) {
        fprintf(out, "  %-12s ", api->outputs[k].name);
        cannl__print_dims(out, &api->outputs[k]);
        fputc('\n', out);
    }
    cannl__flags_help(out, FLAGS, NFLAGS);
    fprintf(out, "\n--output PATH writes the only output to PATH; with several outputs, output NAME goes to PATH\n"
                 "with its .npy or .csv replaced by .NAME.npy or .NAME.csv (out.npy: out.logits.npy, ...;\n"
                 "no such suffix: PATH.NAME.npy). --output NAME=PATH writes output NAME to PATH (repeatable;\n"
                 "only the outputs named, unless PATH is also given). A PATH ending in .csv gets CSV text (one\n"
                 "line per example, values comma-separated, digits that round-trip, no header), any other .npy.\n"
                 "The outputs are written all or none.\n"
                 "--metric prints 'test loss: X' and 'test METRIC: X' as the training program does.\n"
                 "\n--generate N --prompt TEXT (a language model: one integer input [ctx] of token ids, first\n"
                 "output [ctx, n] logits) writes the prompt and N sampled tokens to stdout: raw bytes when\n"
                 "n = 256 (the prompt's bytes are its ids), else ids one per line (--prompt '5 17 3').\n"
                 "Each token is drawn from softmax(logits / T) at the last position, among the K most likely\n"
                 "with --top-k K; past ctx tokens the last ctx/2 are kept and generation continues.\n"
                 "--prompts FILE generates for each line of FILE (a prompt as --prompt takes it, without\n"
                 "its newline; at most 65536 lines), --batch N lines at once (default 8; one sequence slot\n"
                 "each in the KV cache), each line's tokens drawn as --prompt LINE --seed S alone draws\n"
                 "them; per line, in order: '### prompt K: B bytes' (K from 1), then the B bytes --prompt LINE\n"
                 "would print, then a newline.\n"
                 "This version re-runs the full forward pass on the window for every token (no KV cache).\n"
                 "\nExit status: 0 done, 1 bad data, file or weights, 2 bad usage.\n");
}
