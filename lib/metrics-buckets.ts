/** Buckets from 10 ms to 10 minutes: wakes take seconds, cold starts minutes. */
export const activationBuckets = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600];
