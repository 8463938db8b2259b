#!/usr/bin/env python3
"""AWS Batch on a moto server, for tests/deploy.rs (no AWS account).

  moto-batch.py ENDPOINT setup     creates an IAM service role, an unmanaged compute
                                   environment, queues mdf-cpu and mdf-gpu, and registers
                                   manifests/batch/*.json as job definitions
  moto-batch.py ENDPOINT describe ID...   prints DescribeJobs' jobs as JSON
"""
import glob
import json
import os
import sys

import boto3

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def client(endpoint, service):
    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )


def setup(endpoint):
    iam = client(endpoint, "iam")
    batch = client(endpoint, "batch")
    try:
        role = iam.get_role(RoleName="mdf-batch-service")["Role"]
    except iam.exceptions.NoSuchEntityException:
        role = iam.create_role(
            RoleName="mdf-batch-service",
            AssumeRolePolicyDocument=json.dumps({
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                               "Principal": {"Service": "batch.amazonaws.com"}}],
            }),
        )["Role"]
    envs = {e["computeEnvironmentName"] for e in
            batch.describe_compute_environments()["computeEnvironments"]}
    if "mdf-test" not in envs:
        batch.create_compute_environment(
            computeEnvironmentName="mdf-test", type="UNMANAGED", state="ENABLED",
            serviceRole=role["Arn"])
    queues = {q["jobQueueName"] for q in batch.describe_job_queues()["jobQueues"]}
    for q in ("mdf-cpu", "mdf-gpu"):
        if q not in queues:
            batch.create_job_queue(
                jobQueueName=q, state="ENABLED", priority=1,
                computeEnvironmentOrder=[{"order": 1, "computeEnvironment": "mdf-test"}])
    for f in sorted(glob.glob(os.path.join(ROOT, "manifests/batch/*.json"))):
        with open(f) as fh:
            batch.register_job_definition(**json.load(fh))
    print("ok")


def describe(endpoint, ids):
    jobs = client(endpoint, "batch").describe_jobs(jobs=ids)["jobs"]
    print(json.dumps(jobs, default=str))


if __name__ == "__main__":
    ep, cmd = sys.argv[1], sys.argv[2]
    if cmd == "setup":
        setup(ep)
    elif cmd == "describe":
        describe(ep, sys.argv[3:])
    else:
        sys.exit(f"unknown command {cmd}")
