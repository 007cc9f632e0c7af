// Run a GGUF model with llama.cpp's prebuilt binaries through node-llama-cpp: evaluate a prompt
// (in batches of --batch tokens; one batch when it holds the whole prompt), then decode greedily,
// and print what each step produced as JSON on stdout (tests/llama/README.md).
//
//   node run_llama.mjs --deps DIR --model M.gguf --gpu cuda|cpu [--prompt N] [--decode N]
//                      [--batch N] [--flash-attention on|off] [--seed N] [--stop-file F]
//
// --gpu cuda puts every layer on the CUDA backend (on the emulated device when LD_LIBRARY_PATH
// selects it); --gpu cpu uses llama.cpp's CPU backend, the reference. Nothing is downloaded or
// built: the prebuilt binaries under DIR (tests/llama/deps.sh) are used as they are.
//
// Output: {"gpu", "model", "batch", "flash_attention", "prompt": [tokens],
//          "prompt_steps": [step...], "decode_steps": [step...], "generated": [tokens]}
// where a step is {"token": greedy next token, "margin": its logit minus the runner-up's,
// "logits": every token's logit}. prompt_steps[i] is the prediction after prompt token i (all of
// them computed in the prompt's batches); decode_steps[j] the one after generated token j - 1
// (decode_steps[0] follows the prompt's last token, so it equals prompt_steps[last]'s token).
//
// --stop-file F: a long-running application for hone to observe (tests/llama/llama_hone_test.cpp):
// after the first round (prompt, then decoding) the sequence is cleared and the same round runs
// again, until F exists. Every round's greedy tokens are added to the output as
// "rounds": [{"prompt_tokens": [...], "generated": [...], "max_logit_diff": vs round 1}]; the
// steps above are the first round's.
import fs from "node:fs";
import path from "node:path";
import {pathToFileURL} from "node:url";

function parseArgs(argv) {
    const args = {prompt: 64, decode: 16, batch: 64, flashAttention: true, seed: 1};
    for (let i = 0; i < argv.length; i++) {
        const flag = argv[i];
        const value = argv[i + 1];
        if (value === undefined) throw new Error(`${flag} wants a value`);
        i++;
        switch (flag) {
            case "--deps": args.deps = value; break;
            case "--model": args.model = value; break;
            case "--gpu":
                if (value !== "cuda" && value !== "cpu") throw new Error("--gpu is cuda or cpu");
                args.gpu = value;
                break;
            case "--prompt": args.prompt = Number.parseInt(value, 10); break;
            case "--decode": args.decode = Number.parseInt(value, 10); break;
            case "--batch": args.batch = Number.parseInt(value, 10); break;
            case "--flash-attention":
                if (value !== "on" && value !== "off") throw new Error("--flash-attention is on or off");
                args.flashAttention = value === "on";
                break;
            case "--seed": args.seed = Number.parseInt(value, 10); break;
            case "--stop-file": args.stopFile = value; break;
            default: throw new Error(`unknown option ${flag}`);
        }
    }
    if (!args.deps || !args.model || !args.gpu) throw new Error("--deps, --model and --gpu are required");
    for (const k of ["prompt", "decode", "batch", "seed"]) {
        if (!Number.isInteger(args[k]) || args[k] < (k === "decode" ? 0 : 1)) throw new Error(`--${k} wants a positive number`);
    }
    return args;
}

// Prompt tokens from the seed: word pieces only (above <unk>, <s>, </s> and the 256 byte tokens
// that hone-llama-gguf writes first), after <s>. A linear congruential generator, so the same
// seed gives the same prompt everywhere.
function promptTokens(count, vocabSize, seed) {
    const first = 3 + 256;
    let state = BigInt(seed);
    const tokens = [1];
    while (tokens.length < count) {
        state = (state * 6364136223846793005n + 1442695040888963407n) & ((1n << 64n) - 1n);
        tokens.push(first + Number((state >> 33n) % BigInt(vocabSize - first)));
    }
    return tokens;
}

function step(next, vocabSize) {
    const logits = new Array(vocabSize).fill(null);
    for (const [token, logit] of next.logits) logits[token] = logit;
    let best = -1, second = -1;
    for (let t = 0; t < vocabSize; t++) {
        if (best < 0 || logits[t] > logits[best]) { second = best; best = t; }
        else if (second < 0 || logits[t] > logits[second]) second = t;
    }
    if (next.token !== best) {
        throw new Error(`the greedy sampler chose ${next.token}, the largest logit is token ${best}`);
    }
    return {token: best, margin: logits[best] - logits[second], logits};
}

const generateNext = {generateNext: {token: true, logits: true, options: {temperature: 0}}};

async function main() {
    const args = parseArgs(process.argv.slice(2));
    const t0 = performance.now();
    const nlc = await import(pathToFileURL(path.join(args.deps, "node_modules", "node-llama-cpp", "dist", "index.js")).href);
    const llama = await nlc.getLlama({
        gpu: args.gpu === "cuda" ? "cuda" : false,
        build: "never",
        skipDownload: true,
        usePrebuiltBinaries: true,
        progressLogs: false,
        logLevel: nlc.LlamaLogLevel.error
    });
    if (args.gpu === "cuda" && llama.gpu !== "cuda") throw new Error(`asked for CUDA, got ${llama.gpu}`);
    const model = await llama.loadModel({modelPath: args.model, gpuLayers: args.gpu === "cuda" ? "max" : 0});
    const vocabSize = model.fileInfo.metadata?.tokenizer?.ggml?.tokens?.length;
    if (!Number.isInteger(vocabSize)) throw new Error("the model names no tokenizer.ggml.tokens");
    const context = await model.createContext({
        contextSize: Math.max(256, args.prompt + args.decode + 16),
        batchSize: args.batch,
        flashAttention: args.flashAttention,
        sequences: 1,
        // One CPU thread: ggml's threads meet at spinning barriers after every operation, and on a
        // loaded 2-core machine (CI, beside other tests) two of them made the CPU backend take a
        // second per token of this tiny model.
        threads: 1
    });
    const sequence = context.getSequence();

    const prompt = promptTokens(args.prompt, vocabSize, args.seed);
    const t1 = performance.now();
    const first = await round(sequence, prompt, vocabSize, args.decode);
    const t3 = performance.now();
    const rounds = [{prompt_tokens: first.promptSteps.map((s) => s.token), generated: first.generated, max_logit_diff: 0}];
    while (args.stopFile && !fs.existsSync(args.stopFile)) {
        await sequence.clearHistory();
        const again = await round(sequence, prompt, vocabSize, args.decode);
        rounds.push({
            prompt_tokens: again.promptSteps.map((s) => s.token),
            generated: again.generated,
            max_logit_diff: maxDiff(first, again)
        });
    }
    process.stdout.write(JSON.stringify({
        gpu: llama.gpu || "cpu",
        model: path.basename(args.model),
        batch: args.batch,
        flash_attention: args.flashAttention,
        prompt,
        prompt_steps: first.promptSteps,
        decode_steps: first.decodeSteps,
        generated: first.generated,
        rounds,
        // wall milliseconds: loading the backend, the model and a context; the prompt; the decoding
        ms: {setup: Math.round(t1 - t0), prompt: Math.round(first.t2 - t1), decode: Math.round(t3 - first.t2)}
    }) + "\n");
    await context.dispose();
    await model.dispose();
    await llama.dispose();
}

// The largest logit difference between two rounds, over every step.
function maxDiff(a, b) {
    let d = 0;
    const steps = (r) => r.promptSteps.concat(r.decodeSteps);
    const sa = steps(a), sb = steps(b);
    for (let i = 0; i < sa.length && i < sb.length; i++) {
        for (let t = 0; t < sa[i].logits.length; t++) d = Math.max(d, Math.abs(sa[i].logits[t] - sb[i].logits[t]));
    }
    return d;
}

// One round: the prompt in batches, then greedy decoding.
async function round(sequence, prompt, vocabSize, decode) {
    const promptOut = await sequence.controlledEvaluate(prompt.map((t) => [t, generateNext]));
    const promptSteps = prompt.map((_, i) => {
        if (promptOut[i]?.next?.logits === undefined) throw new Error(`no logits after prompt token ${i}`);
        return step(promptOut[i].next, vocabSize);
    });

    const t2 = performance.now();
    const decodeSteps = [];
    const generated = [];
    let last = promptSteps[promptSteps.length - 1];
    for (let j = 0; j < decode; j++) {
        decodeSteps.push(last);
        generated.push(last.token);
        if (j + 1 === decode) break;
        const out = await sequence.controlledEvaluate([[last.token, generateNext]]);
        if (out[0]?.next?.logits === undefined) throw new Error(`no logits after generated token ${j}`);
        last = step(out[0].next, vocabSize);
    }
    return {promptSteps, decodeSteps, generated, t2};
}

main().catch((error) => {
    process.stderr.write(`run_llama: ${error?.stack ?? error}\n`);
    process.exit(1);
});
