#!/usr/bin/env python3
"""launch_rewrite.py IN OUT: the CUDA source IN with each kernel launch `name<<<grid, block, 0,
stream>>>(args);` written as `emu_launch(dim3(grid), dim3(block), [&]{ name(args); });` (the CPU
stand-in, cuda_runtime.h here) and cannl_attention.cuh included as cannl_attention_emu.cuh (the
same rewrite of it)."""
import re, sys
s = open(sys.argv[1]).read()
def split_top(x):
    parts, depth, cur = [], 0, ''
    for ch in x:
        if ch in '([{': depth += 1
        if ch in ')]}': depth -= 1
        if ch == ',' and depth == 0: parts.append(cur); cur = ''
        else: cur += ch
    parts.append(cur); return parts
pat = re.compile(r'([A-Za-z_][\w:]*(?:<[^<>;]*>)?)<<<(.+?)>>>\((.*?)\);', re.S)
def rep(m):
    cfg = split_top(m.group(2))
    return f'emu_launch(dim3({cfg[0]}), dim3({cfg[1]}), [&]{{ {m.group(1)}({m.group(3)}); }});'
s = pat.sub(rep, s)
s = s.replace('#include "cannl_attention.cuh"', '#include "cannl_attention_emu.cuh"')
open(sys.argv[2], 'w').write(s)
