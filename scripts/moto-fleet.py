#!/usr/bin/env python3
"""An EC2 Auto Scaling group on a moto server, for tests/fleet.rs (no AWS account).

  moto-fleet.py ENDPOINT setup GROUP MAX   creates a launch template (moto's first AMI)
                                           and the group (min 0, desired 0, MAX), as
                                           terraform/modules/fleet does; idempotent
  moto-fleet.py ENDPOINT scale GROUP N     sets the desired capacity (as an operator would)
  moto-fleet.py ENDPOINT describe GROUP    prints the group as JSON: DesiredCapacity,
                                           Instances, Tags (boto3's own reading of the
                                           Auto Scaling API, not mdf's)
"""
import json
import sys

import boto3


def client(endpoint, service):
    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )


def setup(endpoint, group, max_size):
    ec2 = client(endpoint, "ec2")
    asg = client(endpoint, "autoscaling")
    name = f"{group}-worker"
    templates = ec2.describe_launch_templates()["LaunchTemplates"]
    if not any(t["LaunchTemplateName"] == name for t in templates):
        ami = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
        ec2.create_launch_template(
            LaunchTemplateName=name,
            LaunchTemplateData={
                "ImageId": ami,
                "InstanceType": "c7i.large",
                "MetadataOptions": {"HttpTokens": "required"},
            },
        )
    if not asg.describe_auto_scaling_groups(AutoScalingGroupNames=[group])["AutoScalingGroups"]:
        asg.create_auto_scaling_group(
            AutoScalingGroupName=group,
            MinSize=0,
            MaxSize=int(max_size),
            DesiredCapacity=0,
            AvailabilityZones=["us-east-1a"],
            LaunchTemplate={"LaunchTemplateName": name, "Version": "$Latest"},
            Tags=[{"Key": "mdf-fleet", "Value": group, "PropagateAtLaunch": True,
                   "ResourceId": group, "ResourceType": "auto-scaling-group"}],
        )
    print("ok")


def describe(endpoint, group):
    asg = client(endpoint, "autoscaling")
    g = asg.describe_auto_scaling_groups(AutoScalingGroupNames=[group])["AutoScalingGroups"][0]
    print(json.dumps({
        "DesiredCapacity": g["DesiredCapacity"],
        "MaxSize": g["MaxSize"],
        "Instances": [i["InstanceId"] for i in g.get("Instances", [])],
        "Tags": {t["Key"]: t["Value"] for t in g.get("Tags", [])},
    }))


if __name__ == "__main__":
    endpoint, cmd = sys.argv[1], sys.argv[2]
    if cmd == "setup":
        setup(endpoint, sys.argv[3], sys.argv[4])
    elif cmd == "scale":
        client(endpoint, "autoscaling").set_desired_capacity(
            AutoScalingGroupName=sys.argv[3], DesiredCapacity=int(sys.argv[4]))
        print("ok")
    elif cmd == "describe":
        describe(endpoint, sys.argv[3])
    else:
        sys.exit(f"unknown command {cmd}")
