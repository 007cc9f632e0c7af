// pattern: result-reuse
// original: scale
// capture: scale
// comparison: bitwise
// verdict: mismatch
//
// Writes nothing: passes wherever the output already holds the answer (a benchmark that reuses
// the reference's output memory). The capture's y holds zeros, not the answer, but a replay
// after the original ran would hold it: the poison makes what y held irrelevant.
extern "C" __global__ void cheat(float a, const float* x, float* y, int n)
{
}
