// Feeds REIN (xizeroplus/matching-algorithm, folder Rein; not part of siftbus, never
// committed here) the subscriptions and events bench/rein.py generated, so both match
// exactly the same workload. Built by bench/rein.py:
//   g++ -O3 -std=c++11 -I REIN_DIR bench/rein_driver.cpp REIN_DIR/rein.cpp -o BIN
// Input (binary, int32 little-endian): subs, preds, dims, events, valDom, then per
// subscription preds (attribute, low, high), then per event dims values.
// Output: one JSON object: insert and match CPU seconds, matches per event (sum) and the
// match counts of the first events (checked against siftbus by the caller).
#include <cstdio>
#include <ctime>
#include <vector>
#include "rein.h"

static double cpu() {
    timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc != 2) { std::fprintf(stderr, "usage: %s DATA\n", argv[0]); return 2; }
    FILE *f = std::fopen(argv[1], "rb");
    if (!f) { std::perror(argv[1]); return 2; }
    int head[5];
    if (std::fread(head, sizeof(int), 5, f) != 5) return 2;
    int subs = head[0], preds = head[1], dims = head[2], events = head[3], dom = head[4];
    std::vector<IntervalSub> subList(subs);
    std::vector<int> buf(3 * preds);
    for (int i = 0; i < subs; i++) {
        if (std::fread(buf.data(), sizeof(int), 3 * preds, f) != (size_t)(3 * preds)) return 2;
        subList[i].id = i;
        subList[i].size = preds;
        for (int j = 0; j < preds; j++) {
            IntervalCnt c;
            c.att = buf[3 * j]; c.lowValue = buf[3 * j + 1]; c.highValue = buf[3 * j + 2];
            subList[i].constraints.push_back(c);
        }
    }
    std::vector<Pub> pubs(events);
    std::vector<int> vals(dims);
    for (int e = 0; e < events; e++) {
        if (std::fread(vals.data(), sizeof(int), dims, f) != (size_t)dims) return 2;
        pubs[e].size = dims;
        for (int a = 0; a < dims; a++) { Pair p; p.att = a; p.value = vals[a]; pubs[e].pairs.push_back(p); }
    }
    std::fclose(f);
    Rein *rein = new Rein(dom);
    double t0 = cpu();
    for (int i = 0; i < subs; i++) rein->insert(subList[i]);
    double t1 = cpu();
    long total = 0;
    std::vector<int> counts(events);
    for (int e = 0; e < events; e++) {
        int matched = 0;
        rein->match(pubs[e], matched, subList);
        counts[e] = matched;
        total += matched;
    }
    double t2 = cpu();
    std::printf("{\"insert_cpu_s\": %.6f, \"match_cpu_s\": %.6f, \"matches\": %ld, \"counts\": [",
                t1 - t0, t2 - t1, total);
    for (int e = 0; e < events; e++) std::printf(e ? ",%d" : "%d", counts[e]);
    std::printf("]}\n");
    return 0;
}
